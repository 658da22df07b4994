import type { FileVersion } from "../files/contained.ts";
import { lruCache } from "../lru.ts";
import type { Logger } from "../log.ts";
import { ownCopy } from "../strings.ts";
import { sectionOf, type Doc } from "./doc.ts";
import { headCost, plan, type BlockKind, type PlanItem } from "./plan.ts";
import { renderPieces, renderedEntries, sectionHead, WHOLE_TAIL, type RenderedEntry } from "./render.ts";
import { countUnits, textBound, unitBound } from "./tokens.ts";
import { inSlices } from "../turns.ts";

export type { BlockKind } from "./plan.ts";

export interface Composed {
  /** The block, or "" when there is nothing to give. */
  readonly text: string;
  /** Exact counts could not be had (logged): "" is then no answer, and the caller tries again later. */
  readonly failed?: true;
  /** Its tokens: exact counts for file text where known, the provable bound elsewhere. */
  readonly tokens: number;
  readonly entries: readonly RenderedEntry[];
}

export interface ComposeExtras {
  /** delivery: files sent again because their text changed. */
  readonly updated?: ReadonlySet<string>;
  /** delivery: worktree-relative paths of delivered files deleted since. */
  readonly deleted?: readonly string[];
  /** Notice lines (watch notices), rendered and escaped. */
  readonly notices?: readonly string[];
  /** system: the session the block is for (the units kept follow the latest block of each). */
  readonly owner?: string;
}

/**
 * A file version's doc is a pure function of an immutable record, cheap to make again (linear),
 * while its units cost far more memory than its text: each version keeps a small doc (its path and
 * unit count), and only the units of the most recently used are kept. A plan asks for the units only
 * of the docs it shows or cuts: a compaction copy of 2,000 files, which names most of them, made
 * every doc's units again (70% of its 110 ms of blocked loop). What is expensive to learn, the exact
 * counts (a separate process), is kept as long as the version lives.
 *
 * How many are kept follows the one block made again and again from the same files: the system
 * block of `delivery: "system"`, which shows the same docs at every step (a session of 220 files
 * kept with 64 made every doc again at each new directory, 14.5 ms a step against 4.6-5.1). Room
 * for twice what the latest system block of each recent session showed, together (sessions alternate:
 * a subagent's small block must not let go of its parent's), and MIN_KEPT_UNITS at least: a stable
 * session's deliveries show each file once, and 256 kept for them cost the RSS benchmark's session
 * about 5 MiB for nothing.
 */
const MIN_KEPT_UNITS = 32;
const MAX_KEPT_UNITS = 4096;
/** Sessions whose latest system block counts toward the room, at most. */
const MAX_OWNERS = 16;
let unitsRoom = MIN_KEPT_UNITS;
/** Docs the latest system block of each recent session showed, the least recent first. */
const shownBy = new Map<string, number>();
const unitsCache = lruCache<FileVersion, readonly string[]>(MAX_KEPT_UNITS);

function keepUnits(file: FileVersion, units: readonly string[]): void {
  unitsCache.set(file, units);
  while (unitsCache.size > unitsRoom) unitsCache.pop();
}

/** A system block of `owner` showed `shown` docs whole or cut: its next one will want their units again. */
function roomForSystemBlock(owner: string, shown: number): void {
  shownBy.delete(owner);
  shownBy.set(owner, shown);
  if (shownBy.size > MAX_OWNERS) shownBy.delete(shownBy.keys().next().value!);
  let all = 0;
  for (const each of shownBy.values()) all += each;
  unitsRoom = Math.min(MAX_KEPT_UNITS, Math.max(MIN_KEPT_UNITS, 2 * all));
  while (unitsCache.size > unitsRoom) unitsCache.pop();
}

const docs = new WeakMap<FileVersion, Doc>();
const counts = new WeakMap<FileVersion, Int32Array>();
const counting = new WeakMap<FileVersion, Promise<Int32Array>>();

/** A version's doc: its units made on first use, and again whenever they were let go since. */
class VersionDoc implements Doc {
  readonly key: string;
  readonly rel: string;
  /** An own copy (see ownCopy): kept while the version is, its units let go. */
  readonly lead: string;
  readonly size: number;

  constructor(readonly file: FileVersion) {
    const { lead, units } = sectionOf(file.body);
    this.key = file.path;
    this.rel = file.rel;
    this.lead = lead === "" ? "" : ownCopy(lead);
    this.size = units.length;
    keepUnits(file, units);
  }

  get units(): readonly string[] {
    let units = unitsCache.get(this.file);
    if (units === undefined) keepUnits(this.file, (units = sectionOf(this.file.body).units));
    return units;
  }
}

/** Lets go of every doc's units (a plugin disposed: their file texts with them). */
export function clearDocs(): void {
  unitsCache.clear();
  shownBy.clear();
  unitsRoom = MIN_KEPT_UNITS;
}

export function docOf(file: FileVersion): Doc {
  let doc = docs.get(file);
  if (doc === undefined) docs.set(file, (doc = new VersionDoc(file)));
  return doc;
}

/** The exact texts a whole file has in any block (sent first, or sent again as updated): how a continued session recognises what its conversation still holds. */
export function wholeSections(file: FileVersion): [string, string] {
  const doc = docOf(file);
  const text = doc.lead + doc.units.join("");
  return [`${sectionHead(doc.rel, false)}${text}${WHOLE_TAIL}`, `${sectionHead(doc.rel, true)}${text}${WHOLE_TAIL}`];
}

/** The file's exact token count (for `explain`). */
export async function tokensOf(file: FileVersion): Promise<number> {
  return (await countsOf(docOf(file))).reduce((sum, count) => sum + count, 0);
}

/**
 * The block of `kind` for `items` (priority order) within `budget`. Exact counts are fetched only for
 * the docs the plan says it needs, so a block that provably fits costs no tokenizer at all; the
 * result is the same bytes whichever counts were already known.
 */
export async function compose(
  kind: BlockKind,
  items: readonly { file: FileVersion; tier: number }[],
  budget: number,
  log: Logger,
  extras: ComposeExtras = {},
): Promise<Composed> {
  // What a plan needs of each file (its doc, its head's cost, its bound until exact counts are known)
  // is made in slices of the event loop: a block of 2,000 files new to blocks must not make it all in one task.
  const docs: Doc[] = [];
  await inSlices(items, SLICE_MS, ({ file }) => {
    const doc = docOf(file);
    headCost(doc, false, textBound);
    if (!counts.has(file)) boundOf(file);
    docs.push(doc);
  });
  const planItems = (): PlanItem[] =>
    items.map(({ file, tier }, i) => {
      const doc = docs[i]!;
      const known = counts.get(file);
      return known === undefined ? { doc, tier, bound: boundOf(file) } : { doc, tier, counts: known };
    });
  for (;;) {
    const input = { kind, items: planItems(), budget, frame: textBound, ...extras };
    const result = plan(input);
    if ("need" in result) {
      try {
        await countAll(result.need);
      } catch (error) {
        log.once(`count:${String(error)}`, "error", `could not count tokens, so no ${kind} block this time: ${String(error)}`);
        return { text: "", tokens: 0, entries: [], failed: true };
      }
      continue;
    }
    const pieces = renderPieces(input, result);
    let tokens = 0;
    for (const piece of pieces) {
      if (piece.item === undefined) tokens += textBound(piece.text);
      else tokens += contentTokens(input.items[piece.item]!, piece.units ?? 0);
    }
    const entries = renderedEntries(input, result);
    if (kind === "system") roomForSystemBlock(extras.owner ?? "", entries.filter((entry) => entry.state === "whole" || entry.state === "cut").length);
    return { text: pieces.map((piece) => piece.text).join(""), tokens, entries };
  }
}

/**
 * Each version's bound (the sum of its units'), once: planning, the block's own count and records all
 * ask for it, and a record of a 2,000-file hierarchy must not remake 2,000 docs.
 */
const bounds = new WeakMap<FileVersion, number>();

function boundOf(file: FileVersion): number {
  let bound = bounds.get(file);
  if (bound === undefined) bounds.set(file, (bound = docOf(file).units.reduce((sum, unit) => sum + unitBound(unit), 0)));
  return bound;
}

/** Whether `knownTokens(file)` is the exact count (else it is the bound, until counts arrive). */
export function tokensExact(file: FileVersion): boolean {
  return counts.has(file);
}

/** Grows whenever some file's exact counts arrive: what was made from `knownTokens` before may be stale. */
export function countsRevision(): number {
  return revision;
}
let revision = 0;

/** The file's tokens without waiting for the tokenizer: exact where counted, else the provable bound (records, lists). */
export function knownTokens(file: FileVersion): number {
  const known = counts.get(file);
  if (known !== undefined) return known.reduce((sum, count) => sum + count, 0);
  return boundOf(file);
}

function contentTokens(item: PlanItem, units: number): number {
  if (item.counts === undefined && item.bound !== undefined && units === item.doc.size) return item.bound;
  let tokens = 0;
  for (let i = 0; i < units; i++) tokens += item.counts?.[i] ?? unitBound(item.doc.units[i]!);
  return tokens;
}

/** A slice of work on many files (docs, heads, bounds, asking for counts): past it, the rest waits for a turn of the event loop. */
const SLICE_MS = 4;

/**
 * Exact counts of `docs`, asked for in slices: a compaction copy of 2,000 files makes the units of
 * every doc without counts again and sends them.
 */
async function countAll(docs: readonly Doc[]): Promise<void> {
  const waits: Promise<Int32Array>[] = [];
  let failed = false;
  await inSlices(docs, SLICE_MS, (doc) => {
    const counted = countsOf(doc);
    // Handled now (rejected later through Promise.all): a failure while a slice waits is no
    // unhandled rejection, and no more is asked of a counter that failed (each ask would start one).
    counted.catch(() => (failed = true));
    waits.push(counted);
    return !failed;
  });
  await Promise.all(waits);
}

function countsOf(doc: Doc): Promise<Int32Array> {
  const { file } = doc as VersionDoc;
  const known = counts.get(file);
  if (known !== undefined) return Promise.resolve(known);
  let pending = counting.get(file);
  if (pending === undefined) {
    pending = countUnits(doc.units).then(
      (result) => {
        counts.set(file, result);
        revision++;
        counting.delete(file);
        return result;
      },
      (error: unknown) => {
        counting.delete(file);
        throw error;
      },
    );
    counting.set(file, pending);
  }
  return pending;
}
