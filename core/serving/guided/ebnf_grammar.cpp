// A GBNF grammar (ebnf_syntax.h) compiled to the matcher's nodes.
//
// The regular parts become automata: a rule that reaches no recursion (`name ::= [A-Z] [a-z]+`),
// and any run of a sequence or set of alternatives made only of such parts, is one ByteDfa that
// the matcher steps byte by byte, instead of a node per character. What is left (recursion, and
// the sequences, alternatives and repeats around it) becomes kSequence, kAnyOf and kRepeat nodes.
// A part whose automaton would be too large falls back to the same nodes over smaller parts.
#include <fmt/format.h>
#include <headway/serving/service_error.h>

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "byte_dfa.h"
#include "ebnf_syntax.h"
#include "grammar.h"

namespace headway::serving::guided {

namespace {

constexpr size_t kMaxRules = 4096;
// How deep rules may be inlined into one automaton (a chain of rules each using the next): past
// it the part is matched as nodes, and the automaton builder's recursion stays bounded.
constexpr uint32_t kMaxInlineDepth = 256;
// What one automaton attempt may spend before it falls back to nodes: a large regular rule must
// not use up the whole grammar's budget before smaller parts are tried. Attempts stop while the
// budget is below the reserve, which is left to the single classes and strings that must compile.
constexpr size_t kAttemptSteps = 1'000'000;
constexpr size_t kLeafReserve = 2'000'000;
// Saturating size (automaton states before it is made deterministic, as the builder would make
// them) of an inlined part: what is not built at all when it is past kMaxNfaStates.
constexpr uint32_t kSizeCap = UINT32_MAX / 2;
constexpr uint32_t kNone = UINT32_MAX;

class EbnfCompiler {
 public:
  EbnfCompiler(const EbnfGrammar& source, const std::string& field)
      : source_(source), field_(field) {}

  Grammar compile() {
    if (source_.rules.size() > kMaxRules) {
      throw ServiceError(ErrorCode::kInvalidArgument,
                         fmt::format("{}: the grammar has {} rules; at most {} are taken", field_,
                                     source_.rules.size(), kMaxRules),
                         field_);
    }
    find_inlinable_rules();
    rule_node_.assign(source_.rules.size(), kNone);
    inlined_.assign(source_.rules.size(), kNone);
    grammar_.root = rule_node(source_.root);
    // Rules are compiled from a work list, not by recursion: a long chain of rules costs no stack.
    while (!pending_.empty()) {
      const uint32_t rule = pending_.back();
      pending_.pop_back();
      compile_rule(rule);
    }
    mark_nullable();
    check_productive();
    check_progress();
    grammar_.raw_text = true;
    return std::move(grammar_);
  }

 private:
  const EbnfExpr& expr(uint32_t index) const { return source_.exprs[index]; }

  std::string rule_field(uint32_t rule) const {
    return fmt::format("{} (rule `{}`)", field_, source_.rules[rule].name);
  }

  uint32_t add_node(GrammarNode node) {
    if (grammar_.nodes.size() >= kMaxNodes) {
      throw ServiceError(
          ErrorCode::kInvalidArgument,
          fmt::format("{}: the grammar needs more than {} nodes; simplify it", field_, kMaxNodes),
          field_);
    }
    grammar_.nodes.push_back(std::move(node));
    owner_.push_back(current_rule_);
    return static_cast<uint32_t>(grammar_.nodes.size() - 1);
  }

  // The rules that may be inlined into automata: those that reach no recursion (no rule on a
  // cycle), so that they are regular languages, and whose inlined tree is at most
  // kMaxInlineDepth deep. Found bottom up (a rule once all the rules it uses are), with a work
  // list rather than recursion: a long chain of rules costs no stack.
  void find_inlinable_rules() {
    const size_t count = source_.rules.size();
    expr_size_.assign(source_.exprs.size(), kUnknown);
    inline_depth_.assign(source_.exprs.size(), kUnknown);
    rule_depth_.assign(count, kNotInlinable);
    rule_size_.assign(count, kSizeCap);
    std::vector<std::vector<std::pair<uint32_t, uint32_t>>> uses(count);  // (rule, depth in body)
    std::vector<uint32_t> own_depth(count, 0);
    std::vector<std::vector<uint32_t>> used_by(count);
    std::vector<uint32_t> unresolved(count, 0);
    for (uint32_t rule = 0; rule < count; ++rule) {
      own_depth[rule] = collect_uses(source_.rules[rule].body, 1, uses[rule]);
      for (const auto& [used, depth] : uses[rule]) used_by[used].push_back(rule);
      unresolved[rule] = static_cast<uint32_t>(uses[rule].size());
    }
    std::vector<uint32_t> ready;
    for (uint32_t rule = 0; rule < count; ++rule) {
      if (unresolved[rule] == 0) ready.push_back(rule);
    }
    while (!ready.empty()) {
      const uint32_t rule = ready.back();
      ready.pop_back();
      uint32_t depth = own_depth[rule];
      for (const auto& [used, at] : uses[rule]) {
        depth = std::max(
            depth, rule_depth_[used] == kNotInlinable ? kNotInlinable : at + rule_depth_[used]);
      }
      rule_size_[rule] = expr_size(source_.rules[rule].body);
      const bool too_big = depth > kMaxInlineDepth || rule_size_[rule] > kMaxNfaStates;
      rule_depth_[rule] = too_big ? kNotInlinable : depth;
      // A rule that uses one too deep or too big is not inlined either; it still resolves its
      // users.
      for (const uint32_t user : used_by[rule]) {
        if (--unresolved[user] == 0) ready.push_back(user);
      }
    }
    // Rules left unresolved reach a cycle: they keep kNotInlinable.
  }

  // The automaton states building `index` would take (its rules' sizes known), saturating.
  // Remembered: every level of a nested part asks for its subtree's.
  uint32_t expr_size(uint32_t index) {
    if (expr_size_[index] != kUnknown) return expr_size_[index];
    const uint32_t size = measure_size(index);
    expr_size_[index] = size;
    return size;
  }
  uint32_t measure_size(uint32_t index) {
    const EbnfExpr& e = expr(index);
    const auto add = [](uint64_t a, uint64_t b) {
      return static_cast<uint32_t>(std::min<uint64_t>(a + b, kSizeCap));
    };
    switch (e.kind) {
      case EbnfKind::kEmpty:
        return 1;
      case EbnfKind::kChars:
        return 2;
      case EbnfKind::kRule:
        return rule_size_[e.rule];
      case EbnfKind::kSequence:
      case EbnfKind::kChoice: {
        uint32_t size = 1;
        for (const uint32_t child : e.children) size = add(size, expr_size(child));
        return size;
      }
      case EbnfKind::kRepeat: {
        // The builder makes a copy per counted item (the minimum and one more where unbounded).
        const uint64_t copies = e.max == kUnboundedRepeat ? uint64_t{e.min} + 1 : e.max;
        return add(1, std::max<uint64_t>(copies, 1) * expr_size(e.children[0]));
      }
    }
    return 1;
  }

  // Appends the rules `index` uses, with how deep in it each use is (`depth` at `index`);
  // returns its depth without them.
  uint32_t collect_uses(uint32_t index, uint32_t depth,
                        std::vector<std::pair<uint32_t, uint32_t>>& uses) const {
    const EbnfExpr& e = expr(index);
    if (e.kind == EbnfKind::kRule) {
      uses.emplace_back(e.rule, depth);
      return depth;
    }
    uint32_t deepest = depth;
    for (const uint32_t child : e.children) {
      deepest = std::max(deepest, collect_uses(child, depth + 1, uses));
    }
    return deepest;
  }

  // Whether `index` may be one automaton: every rule it uses may be inlined, and the whole is
  // at most kMaxInlineDepth deep.
  bool inlinable(uint32_t index) { return inline_depth(index) <= kMaxInlineDepth; }
  // Remembered, as expr_size().
  uint32_t inline_depth(uint32_t index) {
    if (inline_depth_[index] != kUnknown) return inline_depth_[index];
    const uint32_t depth = measure_depth(index);
    inline_depth_[index] = depth;
    return depth;
  }
  uint32_t measure_depth(uint32_t index) {
    const EbnfExpr& e = expr(index);
    if (e.kind == EbnfKind::kRule) {
      return rule_depth_[e.rule] == kNotInlinable ? kNotInlinable : rule_depth_[e.rule] + 1;
    }
    uint32_t deepest = 1;
    for (const uint32_t child : e.children) {
      const uint32_t depth = inline_depth(child);
      if (depth == kNotInlinable) return kNotInlinable;
      deepest = std::max(deepest, depth + 1);
    }
    return deepest;
  }

  uint32_t rule_node(uint32_t rule) {
    if (rule_node_[rule] == kNone) {
      const uint32_t saved = current_rule_;
      current_rule_ = rule;
      rule_node_[rule] = add_node(GrammarNode{});
      current_rule_ = saved;
      pending_.push_back(rule);
    }
    return rule_node_[rule];
  }

  void compile_rule(uint32_t rule) {
    current_rule_ = rule;
    const uint32_t slot = rule_node_[rule];
    const uint32_t body = node_of(source_.rules[rule].body);
    if (body > slot && std::find(rule_node_.begin(), rule_node_.end(), body) == rule_node_.end()) {
      grammar_.nodes[slot] = std::move(grammar_.nodes[body]);  // made for this rule alone
      grammar_.nodes[body] = GrammarNode{};
      grammar_.nodes[body].kind = NodeKind::kSequence;  // left unused: the empty text
      grammar_.nodes[body].nullable = true;
    } else if (grammar_.nodes[body].kind == NodeKind::kRegex) {  // a rule's shared automaton
      grammar_.nodes[slot] = grammar_.nodes[body];
    } else {  // another rule's node, or the rule itself: the rule is that node
      grammar_.nodes[slot].kind = NodeKind::kSequence;
      grammar_.nodes[slot].parts = {body};
    }
  }

  // The node that matches `index`: an automaton where it is regular and one can be built, nodes
  // over its parts otherwise.
  uint32_t node_of(uint32_t index) {
    const EbnfExpr& e = expr(index);
    if (e.kind == EbnfKind::kRule) {
      if (rule_depth_[e.rule] != kNotInlinable && rule_node_[e.rule] == kNone) {
        if (const std::optional<uint32_t> automaton = automaton_of({index}, EbnfKind::kSequence)) {
          rule_node_[e.rule] = *automaton;  // shared by every use of the rule
          return *automaton;
        }
      }
      return rule_node(e.rule);
    }
    if (e.kind != EbnfKind::kSequence && e.kind != EbnfKind::kChoice && inlinable(index)) {
      if (const std::optional<uint32_t> automaton = automaton_of({index}, EbnfKind::kSequence)) {
        return *automaton;
      }
    }
    GrammarNode node;
    switch (e.kind) {
      case EbnfKind::kEmpty:
        node.kind = NodeKind::kSequence;
        return add_node(std::move(node));
      case EbnfKind::kChars:  // a single class only fails to compile past the budget
        return leaf_automaton(index);
      case EbnfKind::kSequence:
        node.kind = NodeKind::kSequence;
        node.parts = grouped(e.children, EbnfKind::kSequence);
        if (node.parts.size() == 1) return node.parts[0];
        return add_node(std::move(node));
      case EbnfKind::kChoice:
        node.kind = NodeKind::kAnyOf;
        node.branches = grouped(e.children, EbnfKind::kChoice);
        if (node.branches.size() == 1) return node.branches[0];
        return add_node(std::move(node));
      case EbnfKind::kRepeat:
        node.kind = NodeKind::kRepeat;
        node.items = node_of(e.children[0]);
        node.min_items = e.min;
        node.max_items = e.max == kUnboundedRepeat ? kUnbounded : e.max;
        return add_node(std::move(node));
      case EbnfKind::kRule:
        break;
    }
    return rule_node(e.rule);
  }

  // The children's nodes, runs of regular ones each made one automaton: consecutive ones in a
  // sequence, all of them in a choice (the order of alternatives does not matter).
  std::vector<uint32_t> grouped(const std::vector<uint32_t>& children, EbnfKind kind) {
    std::vector<uint32_t> nodes;
    std::vector<uint32_t> run;
    const auto flush = [&]() {
      if (run.size() > 1) {
        if (const std::optional<uint32_t> automaton = automaton_of(run, kind)) {
          nodes.push_back(*automaton);
          run.clear();
          return;
        }
      }
      for (const uint32_t child : run) nodes.push_back(node_of(child));
      run.clear();
    };
    for (const uint32_t child : children) {
      if (inlinable(child)) {
        run.push_back(child);
        continue;
      }
      if (kind == EbnfKind::kSequence) flush();
      nodes.push_back(node_of(child));
    }
    flush();
    return nodes;
  }

  // A new automaton's tree shares no subtree with the last one's.
  void forget_inlined() {
    for (const uint32_t rule : inlined_rules_) inlined_[rule] = kNone;
    inlined_rules_.clear();
  }

  // One automaton for `exprs` (each inlinable()) one after another (kSequence) or any one of
  // them (kChoice); none where it would be too large or costly.
  std::optional<uint32_t> automaton_of(const std::vector<uint32_t>& exprs, EbnfKind kind) {
    // Sized before it is built: a part past the bounds costs nothing to refuse, and each
    // attempt's building is charged to the grammar's budget, so attempts cannot add up.
    uint64_t size = 0;
    for (const uint32_t index : exprs) size += expr_size(index);
    if (size > kMaxNfaStates || budget_.steps < kLeafReserve + size) return std::nullopt;
    budget_.steps -= size;
    RegexTree tree;
    forget_inlined();
    std::vector<uint32_t> roots;
    for (const uint32_t index : exprs) roots.push_back(regex_of(index, tree));
    tree.root = list(tree, kind == EbnfKind::kSequence ? RegexKind::kConcat : RegexKind::kAlternate,
                     std::move(roots));
    CompileBudget attempt{std::min(budget_.steps - kLeafReserve, kAttemptSteps)};
    const size_t before = attempt.steps;
    try {
      ByteDfa dfa = build_byte_dfa(tree, false, field_, attempt);
      budget_.steps -= before - attempt.steps;
      return automaton_node(std::move(dfa));
    } catch (const ServiceError&) {
      budget_.steps -= before - attempt.steps;
      return std::nullopt;
    }
  }

  // A single class or character string, which must compile: only a spent budget stops it.
  uint32_t leaf_automaton(uint32_t index) {
    RegexTree tree;
    forget_inlined();
    tree.root = regex_of(index, tree);
    return automaton_node(build_byte_dfa(tree, false, rule_field(current_rule_), budget_));
  }

  uint32_t automaton_node(ByteDfa dfa) {
    pattern_cells_ += dfa.cells();
    if (pattern_cells_ > kMaxPatternCells) {
      throw ServiceError(ErrorCode::kInvalidArgument,
                         fmt::format("{}: the grammar's automata need more than {} cells in all; "
                                     "simplify it",
                                     field_, kMaxPatternCells),
                         field_);
    }
    grammar_.patterns.push_back(std::move(dfa));
    GrammarNode node;
    node.kind = NodeKind::kRegex;
    node.pattern = static_cast<uint32_t>(grammar_.patterns.size() - 1);
    return add_node(std::move(node));
  }

  static uint32_t list(RegexTree& tree, RegexKind kind, std::vector<uint32_t> children) {
    if (children.size() == 1) return children[0];
    RegexNode node;
    node.kind = children.empty() ? RegexKind::kEmpty : kind;
    node.children = std::move(children);
    tree.nodes.push_back(std::move(node));
    return static_cast<uint32_t>(tree.nodes.size() - 1);
  }

  // The regular expression tree of an inlinable part (at most kMaxInlineDepth deep: bounded
  // recursion); a rule used twice is one shared subtree.
  uint32_t regex_of(uint32_t index, RegexTree& tree) {
    const EbnfExpr& e = expr(index);
    std::vector<uint32_t> children;
    switch (e.kind) {
      case EbnfKind::kEmpty:
        return list(tree, RegexKind::kEmpty, {});
      case EbnfKind::kChars: {
        RegexNode node;
        node.kind = RegexKind::kChars;
        node.chars = e.chars;
        tree.nodes.push_back(std::move(node));
        return static_cast<uint32_t>(tree.nodes.size() - 1);
      }
      case EbnfKind::kRule:
        if (inlined_[e.rule] == kNone) {
          const uint32_t subtree = regex_of(source_.rules[e.rule].body, tree);
          inlined_[e.rule] = subtree;
          inlined_rules_.push_back(e.rule);
        }
        return inlined_[e.rule];
      case EbnfKind::kSequence:
      case EbnfKind::kChoice:
        for (const uint32_t child : e.children) children.push_back(regex_of(child, tree));
        return list(tree,
                    e.kind == EbnfKind::kSequence ? RegexKind::kConcat : RegexKind::kAlternate,
                    std::move(children));
      case EbnfKind::kRepeat: {
        RegexNode node;
        node.kind = RegexKind::kRepeat;
        node.children = {regex_of(e.children[0], tree)};
        node.min = e.min;
        node.max = e.max;
        tree.nodes.push_back(std::move(node));
        return static_cast<uint32_t>(tree.nodes.size() - 1);
      }
    }
    return list(tree, RegexKind::kEmpty, {});
  }

  // Which nodes match the empty text: the least fixed point, from "none".
  void mark_nullable() {
    for (bool changed = true; changed;) {
      changed = false;
      for (GrammarNode& node : grammar_.nodes) {
        if (node.nullable) continue;
        const auto nullable = [&](uint32_t n) { return grammar_.nodes[n].nullable; };
        bool now = false;
        switch (node.kind) {
          case NodeKind::kRegex:
            now =
                grammar_.patterns[node.pattern].accepting(grammar_.patterns[node.pattern].start());
            break;
          case NodeKind::kSequence:
            now = std::all_of(node.parts.begin(), node.parts.end(), nullable);
            break;
          case NodeKind::kAnyOf:
            now = std::any_of(node.branches.begin(), node.branches.end(), nullable);
            break;
          case NodeKind::kRepeat:
            now = node.min_items == 0 || nullable(node.items);
            break;
          default:
            break;
        }
        if (now) {
          node.nullable = true;
          changed = true;
        }
      }
    }
  }

  // Every node must be able to end: a rule whose every way through uses itself again
  // (`loop ::= "x" loop`) would let the answer go on forever with no way to complete it.
  void check_productive() const {
    const size_t count = grammar_.nodes.size();
    std::vector<uint8_t> ends(count, 0);
    const auto can_end = [&](uint32_t n) { return ends[n] != 0; };
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t n = 0; n < count; ++n) {
        if (ends[n] != 0) continue;
        const GrammarNode& node = grammar_.nodes[n];
        bool now = true;  // an automaton always has a match (a pruned one is never empty)
        if (node.kind == NodeKind::kSequence) {
          now = std::all_of(node.parts.begin(), node.parts.end(), can_end);
        } else if (node.kind == NodeKind::kAnyOf) {
          now = std::any_of(node.branches.begin(), node.branches.end(), can_end);
        } else if (node.kind == NodeKind::kRepeat) {
          now = node.min_items == 0 || can_end(node.items);
        }
        if (now) {
          ends[n] = 1;
          changed = true;
        }
      }
    }
    // A rule that never ends names the fault best; a part of a rule, where no rule does.
    std::vector<uint32_t> order;
    for (const uint32_t node : rule_node_) {
      if (node != kNone) order.push_back(node);
    }
    for (uint32_t n = 0; n < count; ++n) order.push_back(n);
    for (const uint32_t n : order) {
      if (ends[n] != 0) continue;
      throw ServiceError(ErrorCode::kInvalidArgument,
                         fmt::format("{}: never ends: every way through it uses a rule that is "
                                     "under way again (such as `loop ::= \"x\" loop`); give it "
                                     "an alternative that ends",
                                     rule_field(owner_[n])),
                         field_);
    }
  }

  // The nodes a node may begin with before it reads a byte.
  std::vector<uint32_t> entered_first(const GrammarNode& node) const {
    switch (node.kind) {
      case NodeKind::kSequence: {
        std::vector<uint32_t> first;
        for (const uint32_t part : node.parts) {
          first.push_back(part);
          if (!grammar_.nodes[part].nullable) break;
        }
        return first;
      }
      case NodeKind::kAnyOf:
        return node.branches;
      case NodeKind::kRepeat:
        return {node.items};
      default:
        return {};
    }
  }

  // The matcher must make progress: no node may reach itself before a byte (left recursion,
  // `expr ::= expr "+" term`), which would loop forever, and no repeat may take an item that
  // matches nothing. The forks one byte may cost (alternatives inside alternatives) are bounded
  // like a schema's.
  void check_progress() const {
    for (const GrammarNode& node : grammar_.nodes) {
      if (node.kind == NodeKind::kRepeat && node.max_items > 1 &&
          grammar_.nodes[node.items].nullable) {
        const size_t at = static_cast<size_t>(&node - grammar_.nodes.data());
        throw ServiceError(ErrorCode::kInvalidArgument,
                           fmt::format("{}: repeats a part that may match the empty text, which "
                                       "could repeat forever without a character; write the part "
                                       "so that it always reads one",
                                       rule_field(owner_[at])),
                           field_);
      }
    }
    // Depth-first, without recursion: 0 unseen, 1 on the path, 2 done.
    const size_t count = grammar_.nodes.size();
    std::vector<uint8_t> mark(count, 0);
    std::vector<uint32_t> forks(count, 0);  // forks_entering() each node from its start
    std::vector<std::pair<uint32_t, size_t>> path;
    std::vector<std::vector<uint32_t>> firsts(count);
    for (size_t n = 0; n < count; ++n) firsts[n] = entered_first(grammar_.nodes[n]);
    for (uint32_t start = 0; start < count; ++start) {
      if (mark[start] != 0) continue;
      path.emplace_back(start, 0);
      mark[start] = 1;
      while (!path.empty()) {
        auto& [node, next] = path.back();
        if (next < firsts[node].size()) {
          const uint32_t child = firsts[node][next++];
          if (mark[child] == 1) {
            throw ServiceError(
                ErrorCode::kInvalidArgument,
                fmt::format("{}: can reach itself before it reads a character (left recursion, "
                            "such as `expr ::= expr \"+\" term`); write it with a repeat instead "
                            "(`expr ::= term (\"+\" term)*`)",
                            rule_field(owner_[child])),
                field_);
          }
          if (mark[child] == 0) {
            mark[child] = 1;
            path.emplace_back(child, 0);
          }
          continue;
        }
        forks[node] = forks_entering(grammar_.nodes[node], 0, forks);
        check_forks(node, forks[node]);
        mark[node] = 2;
        path.pop_back();
      }
    }
    // A sequence under way enters its later parts on a later byte: each suffix counts too.
    for (uint32_t n = 0; n < count; ++n) {
      const GrammarNode& node = grammar_.nodes[n];
      if (node.kind != NodeKind::kSequence) continue;
      for (size_t from = 1; from < node.parts.size(); ++from) {
        check_forks(n, forks_entering(node, from, forks));
      }
    }
  }

  void check_forks(uint32_t node, uint32_t forks) const {
    if (forks <= static_cast<uint32_t>(kMaxChoiceDepth)) return;
    throw ServiceError(ErrorCode::kInvalidArgument,
                       fmt::format("{}: nests alternatives and repeats more than {} deep before a "
                                   "character; simplify it",
                                   rule_field(owner_[node]), kMaxChoiceDepth),
                       field_);
  }

  // The most forks (alternatives, repeats: the matcher's recursion) entering `node` may take
  // before a byte, from its part `from` on for a sequence; `forks` holds those of the nodes it
  // enters.
  uint32_t forks_entering(const GrammarNode& node, size_t from,
                          const std::vector<uint32_t>& forks) const {
    switch (node.kind) {
      case NodeKind::kSequence: {
        uint32_t sum = 0;  // the nullable parts' forks add up: each one may close, then the next
        for (size_t part = from; part < node.parts.size(); ++part) {
          sum += forks[node.parts[part]];
          if (!grammar_.nodes[node.parts[part]].nullable) break;
        }
        return sum;
      }
      case NodeKind::kAnyOf: {
        uint32_t most = 0;
        for (const uint32_t branch : node.branches) most = std::max(most, forks[branch]);
        return most + 1;
      }
      case NodeKind::kRepeat:
        return forks[node.items] + 1;
      default:
        return 0;
    }
  }

  const EbnfGrammar& source_;
  const std::string& field_;
  Grammar grammar_;
  static constexpr uint32_t kNotInlinable = UINT32_MAX;
  std::vector<uint32_t> rule_depth_;  // each rule's inlined depth, or kNotInlinable
  std::vector<uint32_t> rule_size_;   // each rule's expr_size() (kSizeCap until known)
  static constexpr uint32_t kUnknown = UINT32_MAX - 1;  // below kNotInlinable
  std::vector<uint32_t> expr_size_;     // expr_size() of each expression, once asked
  std::vector<uint32_t> inline_depth_;  // inline_depth() of each expression, once asked
  std::vector<uint32_t> rule_node_;
  std::vector<uint32_t> pending_;
  std::vector<uint32_t> owner_;          // the rule each node was made for
  std::vector<uint32_t> inlined_;        // per automaton: each rule's subtree in it
  std::vector<uint32_t> inlined_rules_;  // the rules inlined_ holds a subtree for
  uint32_t current_rule_ = 0;
  size_t pattern_cells_ = 0;
  CompileBudget budget_{2 * kMaxSubsetWork};  // all the grammar's automata together
};

}  // namespace

Grammar ebnf_grammar(std::string_view text, const std::string& field) {
  const EbnfGrammar source = parse_ebnf(text, field);
  return EbnfCompiler(source, field).compile();
}

}  // namespace headway::serving::guided
