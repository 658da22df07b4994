import { HEADING, layout, LINE, PARAGRAPH, type Doc, type Layout } from "./doc.ts";
import { BLOCK_CLOSE, blockHead, cutTail, deletedNotice, leftOutListOf, MAX_NAMED, sectionHead, WHOLE_TAIL, type Left } from "./render.ts";

/**
 * Budget planning: which files go into a block whole, which are cut where, which are only named.
 *
 * Policy (system and delivery blocks). Items come in priority order with a tier (0 = the chain of
 * the directory touched last, 1 = new files of the one before, ...). Tiers are filled in order: a
 * later tier gets nothing until every earlier tier is whole. Inside the first tier that does not
 * fit, the closest docs share what is left (water-filling: a doc smaller than the fair share stays
 * whole, the others get the share); while a share would leave a doc under MIN_SHARE tokens of text,
 * the farthest doc of the tier is left out instead. Each doc is cut at the latest legal boundary
 * its share pays for (note included), leftover is handed round again until no cut can grow, then
 * left-out docs of the tier are tried again as cuts. Every doc not whole is named: a cut by its
 * note, the others in the list (at most MAX_NAMED by path, fewer only if the names alone would not
 * fit). The compaction copy goes by priority only: each doc whole while it fits, the first that
 * does not is cut, the rest are listed.
 *
 * Where to cut (PREFERENCES): once the fill is done, each cut moves back to the latest heading if
 * that keeps >= 80% of the tokens the cut keeps, else to a paragraph end keeping >= 90%, else to a
 * line end keeping >= 95%, but only while the block still uses >= 95% of the budget. Never inside a
 * fenced code block (see doc.ts), never splitting a surrogate pair (units never do).
 *
 * Guarantees, for every input (property-tested in tests/block/plan.test.ts):
 * - The block costs at most `budget` (framing pieces at `frame`, file text at the exact counts of
 *   the units kept), or there is no block at all when even its frame and a bare count of the files
 *   do not fit.
 * - System and delivery blocks, when not everything is whole: the block uses >= 95% of the budget,
 *   OR no single step fits in what is left: no cut of the first tier not whole can grow to its next
 *   legal boundary and none of that tier's left-out docs can be shown up to its first one. Fences,
 *   and long stretches with no legal cut (punctuation runs, one long piece: see units.ts and doc.ts),
 *   are what can make a step large; where every unit boundary is legal the unused part is below one
 *   unit plus one section's framing and one list entry, so >= 95% holds for any budget of 20 such
 *   steps or more.
 * - Decisions are a pure function of (docs, exact counts, budget, kind, updated, deleted): counts
 *   supplied beyond those needed, and the bounds, change nothing.
 */

export const MIN_SHARE = 64;
export const TARGET_USE = 0.95;
const PREFERENCES = [
  [HEADING, 0.8],
  [PARAGRAPH, 0.9],
  [LINE, 0.95],
] as const;
/** Fair-share rounds before the leftover goes to the closest cut that can take it. */
const MAX_ROUNDS = 32;

export type BlockKind = "system" | "delivery" | "compaction";

export interface PlanItem {
  readonly doc: Doc;
  readonly tier: number;
  /** Exact token count of each unit of `doc`, when known. */
  readonly counts?: Int32Array;
  /** A provable upper bound of the doc's tokens (the sum over its units), when the caller knows it; else `frame`'s is taken. */
  readonly bound?: number;
}

export interface PlanInput {
  readonly kind: BlockKind;
  /** Priority order: most important first. */
  readonly items: readonly PlanItem[];
  readonly budget: number;
  /** Cost of framing text; production passes a provable upper bound of its exact count. */
  readonly frame: (text: string) => number;
  /** delivery: keys of docs sent again because their text changed. */
  readonly updated?: ReadonlySet<string>;
  /** delivery: rels of delivered files that were deleted since. */
  readonly deleted?: readonly string[];
  /** Notice lines, rendered and escaped by their maker (watch notices), shown after the files. */
  readonly notices?: readonly string[];
}

export type Decision =
  | { readonly state: "whole" }
  /** Units [0, keptUnits) kept; `line` (1-based) is where the rest starts. */
  | { readonly state: "cut"; readonly keptUnits: number; readonly keptTokens: number; readonly totalTokens: number; readonly line: number }
  | { readonly state: "omitted"; readonly totalTokens: number };

export interface Plan {
  /** One per item, same order. */
  readonly decisions: readonly Decision[];
  /** How many omitted docs the list names by path (in priority order); the rest are counted. */
  readonly named: number;
  /** No block: the budget cannot hold even its frame. */
  readonly empty: boolean;
}

/** `need`: exact counts are required for these docs before anything can be decided. */
export type PlanResult = { readonly need: readonly Doc[] } | Plan;

/** What a block of `kind` costs with no file and no notice in it: its head, its close and the notices of `deleted` files. */
export function frameCost(kind: BlockKind, deleted: readonly string[], frame: (text: string) => number): number {
  return frame(blockHead(kind)) + frame(BLOCK_CLOSE) + sum(deleted.map((rel) => frame(deletedNotice(rel))));
}

export function plan(input: PlanInput): PlanResult {
  const { items, budget, frame, kind } = input;
  for (const { doc, counts } of items) {
    if (counts !== undefined && counts.length !== doc.size) throw new RangeError(`counts for ${doc.key} do not match its units`);
  }
  const deleted = input.deleted ?? [];
  const notices = input.notices ?? [];
  const fixed = frameCost(kind, deleted, frame) + sum(notices.map(frame));
  const heads = items.map(({ doc }) => headCost(doc, input.updated?.has(doc.key) === true, frame));
  const wholeTail = frame(WHOLE_TAIL);
  // Everything whole: proven with exact counts where given and frame's upper bound elsewhere. A
  // bound proves only what the exact counts would decide too, so the outcome never depends on it.
  const everything = items.reduce((total, { doc, counts, bound: known }, i) => total + heads[i]! + wholeTail + (counts ? sum(counts) : (known ?? bound(doc, frame))), fixed);
  if (everything <= budget || items.length === 0) {
    const empty = (items.length === 0 && deleted.length === 0 && notices.length === 0) || fixed > budget;
    return Object.freeze({ decisions: items.map(() => WHOLE), named: 0, empty });
  }
  const need = items.filter((item) => item.counts === undefined).map((item) => item.doc);
  if (need.length > 0) return Object.freeze({ need });
  return planExactly(input, fixed, heads, wholeTail);
}

const WHOLE: Decision = Object.freeze({ state: "whole" });

/** frame's bound of a doc's text, kept per doc for the last counter asked: each step plans again. */
const bounds = new WeakMap<Doc, { readonly frame: (text: string) => number; readonly tokens: number }>();

function bound(doc: Doc, frame: (text: string) => number): number {
  let known = bounds.get(doc);
  if (known?.frame !== frame) bounds.set(doc, (known = { frame, tokens: frame(doc.units.join("")) }));
  return known.tokens;
}

/** frame's bound of each doc's section head, kept per doc for the last counter asked: a plan of 2,000 files framed 2,000 heads each time (17 ms). */
const headBounds = new WeakMap<Doc, { readonly frame: (text: string) => number; readonly tokens: number }>();

/** What a doc's section head costs, with the doc's lead it takes in (`updated`: the head of a file sent again, rare, not kept). */
export function headCost(doc: Doc, updated: boolean, frame: (text: string) => number): number {
  if (updated) return frame(sectionHead(doc.rel, true) + doc.lead);
  let known = headBounds.get(doc);
  if (known?.frame !== frame) headBounds.set(doc, (known = { frame, tokens: frame(sectionHead(doc.rel, false) + doc.lead) }));
  return known.tokens;
}

/** The tier of `priority: critical` files (the rules give it): first in every block, and never cut. */
export const CRITICAL_TIER = -2;

const OMITTED = -1;

/** Docs a list is weighed without (see listCost): which, how many of them are left out, and their tokens. */
interface Skip {
  has(i: number): boolean;
  readonly count: number;
  readonly tokens: number;
}
const NO_SKIP: Skip = Object.freeze({ has: () => false, count: 0, tokens: 0 });

/** What cutting a doc needs: made only for the docs the plan considers cutting (most of a large hierarchy is only named). */
interface Counted {
  readonly doc: Doc;
  readonly layout: Layout;
  /** `prefix[k]`: exact tokens of units [0, k). */
  readonly prefix: Float64Array;
  readonly tails: Map<number, number>;
}

function planExactly(input: PlanInput, fixed: number, heads: readonly number[], wholeTail: number): Plan {
  const { items, budget, frame, kind } = input;
  const totals = items.map(({ counts }) => sum(counts!));
  const wholes = items.map((_, i) => heads[i]! + totals[i]! + wholeTail);
  // A doc's units, layout and prefix sums only when a cut of it is weighed: a compaction copy of
  // 2,000 files names most of them, and making every doc's units (its escaped text) again took
  // 70% of its 110 ms of blocked loop.
  const docs: (Counted | undefined)[] = [];
  const counted = (i: number): Counted => {
    let known = docs[i];
    if (known === undefined) {
      const { doc, counts } = items[i]!;
      const prefix = new Float64Array(counts!.length + 1);
      counts!.forEach((count, k) => (prefix[k + 1] = prefix[k]! + count));
      docs[i] = known = { doc, layout: layout(doc), prefix, tails: new Map() };
    }
    return known;
  };
  const size = (i: number) => items[i]!.doc.size;
  const total = (i: number) => totals[i]!;

  const cost = (i: number, k: number): number => {
    if (k === OMITTED) return 0;
    if (k === size(i)) return wholes[i]!;
    const d = counted(i);
    let tail = d.tails.get(k);
    if (tail === undefined) {
      tail = frame(cutTail(d.doc.rel, total(i) - d.prefix[k]!, d.layout.lines[k]!, d.doc.units[k - 1]!.endsWith("\n")));
      d.tails.set(k, tail);
    }
    return heads[i]! + d.prefix[k]! + tail;
  };

  // The state: kept[i] is OMITTED, a cut (units kept) or size(i) (whole); the block's cost follows it.
  const kept = new Int32Array(items.length).fill(OMITTED);
  // Names in the list at most: the compaction copy's names every file left out (fitted from none
  // up, see fitNames), a block's MAX_NAMED.
  const mostNamed = kind === "compaction" ? items.length : MAX_NAMED;
  let named = kind === "compaction" ? 0 : MAX_NAMED;
  // The left-out docs' count and tokens, kept as the state changes: a plan weighs the list many
  // times, and listing every doc each time was quadratic (a new session's first block with 3,000
  // always files: 1.9 s of blocked loop, 0.5 s since).
  let leftCount = items.length;
  let leftTokens = sum(totals);
  /** No doc before it is left out (set moves it back when one is). */
  let firstLeft = 0;
  /**
   * What the list costs with the left-out docs but those `skip` holds (weighed as shown; `count` and
   * `tokens` are theirs): the first `named` by a scan from the top, the rest only counted.
   */
  const listCost = (skip: Skip = NO_SKIP) => {
    const count = leftCount - skip.count;
    if (count <= 0) return 0;
    const names: Left[] = [];
    let namedTokens = 0;
    // The docs above firstLeft are all shown: a scan from the top past every shown doc, at each tier
    // that fits, was quadratic too.
    while (firstLeft < items.length && kept[firstLeft] !== OMITTED) firstLeft++;
    for (let i = firstLeft; i < items.length && names.length < named; i++) {
      if (kept[i] !== OMITTED || skip.has(i)) continue;
      names.push({ rel: items[i]!.doc.rel, tokens: total(i) });
      namedTokens += total(i);
    }
    return frame(leftOutListOf(kind, names, count - names.length, leftTokens - skip.tokens - namedTokens));
  };
  let shownCost = 0;
  let list = listCost();
  const used = () => fixed + shownCost + list;
  const isCut = (i: number) => kept[i]! > 0 && kept[i]! < size(i);
  /** Sets doc i to k; the list is recounted only when i joins or leaves it, and not at all for `batch`. */
  const set = (i: number, k: number, batch = false) => {
    const relist = (kept[i] === OMITTED) !== (k === OMITTED);
    if (relist) {
      leftCount += k === OMITTED ? 1 : -1;
      leftTokens += k === OMITTED ? total(i) : -total(i);
    }
    shownCost += cost(i, k) - cost(i, kept[i]!);
    kept[i] = k;
    if (k === OMITTED && i < firstLeft) firstLeft = i;
    if (relist && !batch) list = listCost();
  };

  /** The latest legal k (size(i) = whole) costing at most `limit`, or OMITTED. */
  const best = (i: number, limit: number): number => {
    if (wholes[i]! <= limit) return size(i);
    const d = counted(i);
    let k = d.layout.previousLegal[Math.min(size(i) - 1, lastAtMost(d.prefix, limit - heads[i]!))] ?? 0;
    // Costs only grow with k apart from the note's digits: step back until the note fits too.
    for (; k >= 1; k = d.layout.previousLegal[k - 1]!) if (cost(i, k) <= limit) return k;
    return OMITTED;
  };

  /** Grows doc i as far as `cap` (its cost) and the budget allow; whether it grew. */
  const grow = (i: number, cap: number): boolean => {
    const current = kept[i]!;
    const listAfter = current === OMITTED ? listCost({ has: (j) => j === i, count: 1, tokens: total(i) }) : list;
    const k = best(i, Math.min(cap, budget - used() + cost(i, current) + list - listAfter));
    if (k <= current) return false;
    set(i, k);
    return true;
  };

  /**
   * Names as many files as fit beside what is shown (mostNamed at most); false when even a bare
   * count does not fit. The list costs more with every name, so the most that fit are found by
   * galloping up from none, then halving between the last two tries: each try's list is about as
   * long as the answer. (Halving down from all the names counted a compaction copy's list of 2,000
   * names about 11 times; one at a time before that was quadratic, 2 s at 2,000 files.)
   */
  const fitNames = () => {
    // A block's list as planned names the most it may: known not to fit when this goes on.
    const triedMost = named === mostNamed;
    if (triedMost && used() <= budget) return true;
    const fits = (n: number) => {
      named = n;
      list = listCost();
      return used() <= budget;
    };
    if (!fits(0)) return false;
    let low = 0;
    let step = 1;
    while (low + step <= mostNamed && fits(low + step)) {
      low += step;
      step *= 2;
    }
    let high = Math.min(mostNamed, low + step - 1);
    while (low < high) {
      const mid = (low + high + 1) >> 1;
      if (fits(mid)) low = mid;
      else high = mid - 1;
    }
    // Naming every file drops the list's "and 1 more file (N tokens)": it can cost less than naming
    // all but one, so it is tried too when the list would be at most about twice one tried already.
    // (Far longer lists cost more than that one entry saves: each name costs a token at least.)
    if (!triedMost && low < mostNamed && mostNamed <= 2 * (low + 1) + 16 && fits(mostNamed)) low = mostNamed;
    if (named !== low) fits(low);
    return true;
  };

  const polish = (candidates: readonly number[]) => {
    const floor = Math.ceil(TARGET_USE * budget);
    for (const i of candidates) {
      if (!isCut(i)) continue;
      const k = kept[i]!;
      const better = preferredCuts(counted(i), k).find((j) => {
        const next = used() - cost(i, k) + cost(i, j);
        return next <= budget && next >= floor;
      });
      if (better !== undefined) set(i, better);
    }
  };

  /** Water-filling inside the tier that does not fit whole, then leftover handed round until nothing grows. */
  const fill = (tier: readonly number[]) => {
    const overheads = tier.map((i) => heads[i]! + frame(cutTail(items[i]!.doc.rel, total(i), counted(i).layout.lines[size(i)]!, false)));
    // The first m docs of the tier, weighed as shown (out of the list), and their costs in order:
    // both follow m down, each step by one doc.
    const inShown = new Uint8Array(items.length);
    const shown: Skip & { count: number; tokens: number } = { has: (i) => inShown[i] === 1, count: 0, tokens: 0 };
    for (const i of tier) {
      inShown[i] = 1;
      if (kept[i] !== OMITTED) continue;
      shown.count++;
      shown.tokens += total(i);
    }
    const costs = tier.map((i) => wholes[i]!).sort((a, b) => a - b);
    for (let m = tier.length; m >= 1; m--) {
      const room = budget - fixed - shownCost - listCost(shown);
      const level = waterLevel(room, costs);
      if (tier.slice(0, m).every((i, at) => wholes[i]! <= level || level >= overheads[at]! + MIN_SHARE)) {
        for (const i of tier.slice(0, m)) grow(i, level);
        break;
      }
      const last = tier[m - 1]!;
      inShown[last] = 0;
      costs.splice(lastAtMost(costs, wholes[last]!), 1);
      if (kept[last] !== OMITTED) continue;
      shown.count--;
      shown.tokens -= total(last);
    }
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const open = tier.filter(isCut);
      const share = open.length > 0 ? Math.floor((budget - used()) / open.length) : 0;
      if (share <= 0 || !open.map((i) => grow(i, cost(i, kept[i]!) + share)).some(Boolean)) break;
    }
    for (let changed = true; changed; ) {
      changed = false;
      for (const i of tier) if (isCut(i) && grow(i, Infinity)) changed = true;
      for (const i of tier) if (kept[i] === OMITTED && grow(i, Infinity)) changed = true;
    }
  };

  const result = (): Plan => {
    const decisions = items.map((_, i): Decision => {
      const k = kept[i]!;
      if (k === OMITTED) return Object.freeze({ state: "omitted", totalTokens: total(i) });
      if (k === size(i)) return WHOLE;
      const d = counted(i);
      return Object.freeze({ state: "cut", keptUnits: k, keptTokens: d.prefix[k]!, totalTokens: total(i), line: d.layout.lines[k]! });
    });
    const left = decisions.filter((decision) => decision.state === "omitted").length;
    return Object.freeze({ decisions, named: Math.min(named, left), empty: false });
  };
  const nothing = (): Plan => {
    kept.fill(OMITTED);
    firstLeft = 0;
    return Object.freeze({ ...result(), named: 0, empty: true });
  };

  if (kind === "compaction") {
    // `priority: critical` files whole before the list is fitted: named first, eighty small files left
    // no room for one. Then each whole while it fits beside the list of the rest; the first that does not is cut.
    items.forEach((item, i) => item.tier === CRITICAL_TIER && set(i, size(i), true));
    list = listCost();
    if (!fitNames()) return nothing();
    let first = 0;
    while (first < items.length && (kept[first] === size(first) || (grow(first, Infinity) && kept[first] === size(first)))) first++;
    polish([first]);
    return result();
  }

  // Tiers in order, each whole while everything before it is; the first that does not fit is filled.
  const order = items.map((_, i) => i).sort((a, b) => items[a]!.tier - items[b]!.tier || a - b);
  for (let at = 0; at < order.length; ) {
    // The run of `order` that shares its first doc's tier (order is sorted by tier): a filter of the whole order for each tier was quadratic.
    let end = at + 1;
    while (end < order.length && items[order[end]!]!.tier === items[order[at]!]!.tier) end++;
    const tier = order.slice(at, end);
    at = end;
    named = mostNamed;
    for (const i of tier) set(i, size(i), true);
    list = listCost();
    // `priority: critical` files stay whole: the list names fewer of the others beside them (budgetFor
    // gives the block room for them beside a bare count; with forty names the block grew for names).
    if (used() <= budget || (items[tier[0]!]!.tier === CRITICAL_TIER && fitNames())) continue;
    for (const i of tier) set(i, OMITTED, true);
    list = listCost();
    if (!fitNames()) return nothing();
    fill(tier);
    polish(tier);
    break;
  }
  return result();
}

/** Largest k with prefix[k] <= value (prefix ascending); -1 when value < prefix[0]. */
function lastAtMost(prefix: ArrayLike<number>, value: number): number {
  let low = -1;
  let high = prefix.length - 1;
  while (low < high) {
    const mid = (low + high + 1) >> 1;
    if (prefix[mid]! <= value) low = mid;
    else high = mid - 1;
  }
  return low;
}

/** The fair share: the largest level with sum(min(cost, level)) <= room (Infinity when all fit); `sorted` ascending. */
function waterLevel(room: number, sorted: readonly number[]): number {
  let rest = room;
  for (let j = 0; j < sorted.length; j++) {
    const share = Math.floor(rest / (sorted.length - j));
    if (sorted[j]! > share) return share;
    rest -= sorted[j]!;
  }
  return Infinity;
}

/** Earlier cuts at better boundaries than k, in order of preference (see PREFERENCES). */
function preferredCuts(d: Counted, k: number): number[] {
  const { ranks } = d.layout;
  const kept = d.prefix[k]!;
  const found: number[] = [];
  for (const [rank, keeps] of PREFERENCES) {
    if (ranks[k]! >= rank) break;
    let j = k - 1;
    while (j >= 1 && ranks[j]! < rank && d.prefix[j]! >= keeps * kept) j--;
    if (j >= 1 && ranks[j]! >= rank && d.prefix[j]! >= keeps * kept) found.push(j);
  }
  return found;
}

function sum(values: ArrayLike<number>): number {
  let total = 0;
  for (let i = 0; i < values.length; i++) total += values[i]!;
  return total;
}
