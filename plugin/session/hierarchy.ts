import type { FileVersion } from "../files/contained.ts";
import type { ToolPath } from "../host/tool-paths.ts";
import { inSlices } from "../turns.ts";

/**
 * Touches resolved, walks held and chains asked for in slices this long at most: a session continued
 * with `opencode run -c` touches every path of its history at once (3,000 directories' starts, a
 * realpath and a stat each, took 57-84 ms in one task). A few touches cost no turn of the loop.
 */
const SLICE_MS = 4;

/** What a session's touched paths lead to: every context file that applies, most important first. */
export interface Hierarchy {
  /** Priority order: tier 0 (the chain of the path touched last, closest first), then each earlier touch's new files. */
  readonly files: readonly FileVersion[];
  readonly tiers: readonly number[];
  readonly byPath: ReadonlyMap<string, FileVersion>;
  /** The directories whose context files the hierarchy was read from: what freshness checks and watches cover. */
  readonly dirSet: ReadonlySet<string>;
  /** The real start directory of each touched path (absent when it lies outside the worktree). */
  readonly starts: ReadonlyMap<string, string>;
  readonly startDirs: ReadonlySet<string>;
  /** Start directories only pins reach: their files are in as `manual` (a pinned file's alone). */
  readonly pinnedStarts: ReadonlySet<string>;
  /** Files that are in only because the session pinned them (include mode "manual"). */
  readonly manual: ReadonlySet<string>;
  /** Each start directory's chain (root first), as merging goes down them; a pinned file's is itself. */
  readonly chains: readonly (readonly FileVersion[])[];
  /** The closest file of each touched or pinned path: the "direct" level, the others being parents (or the root). */
  readonly closest: ReadonlySet<string>;
}

/**
 * The hierarchy for the session's current touches when its files stay the same: every touched path
 * starts where a touched path of `hierarchy` already starts (another file of a directory already
 * touched: the common case), so only the paths are new. Where only pins start (their files are
 * `manual`; a pinned file comes alone), a touch changes the files: computed again then. Given
 * `forgotten` (touches were forgotten since), every start a touch reached must still be reached
 * (the session directory counts as a touch), or a file left. Undefined when the hierarchy must be
 * computed again.
 */
export function extendHierarchy(
  source: ChainSource,
  hierarchy: Hierarchy,
  touches: Iterable<ToolPath>,
  forgotten?: { readonly sessionDir: ToolPath; readonly pins: Iterable<ToolPath> },
): Hierarchy | undefined {
  // Rebuilt from scratch when touches were forgotten (their paths go); else copied once a path is new.
  let starts: Map<string, string> | undefined = forgotten === undefined ? undefined : new Map();
  const touchedStarts = new Set<string>();
  const visit = (touch: ToolPath): boolean => {
    const known = hierarchy.starts.get(touch.path);
    const start = known ?? source.resolveStart(touch.path, touch.isFile);
    if (start instanceof Promise) return false;
    if (start === undefined) return true;
    if (!hierarchy.startDirs.has(start) || hierarchy.pinnedStarts.has(start)) return false;
    touchedStarts.add(start);
    if (starts !== undefined) starts.set(touch.path, start);
    else if (known === undefined) (starts = new Map(hierarchy.starts)).set(touch.path, start);
    return true;
  };
  for (const touch of touches) if (!visit(touch)) return undefined;
  if (forgotten !== undefined) {
    if (!visit(forgotten.sessionDir)) return undefined;
    if (touchedStarts.size !== hierarchy.startDirs.size - hierarchy.pinnedStarts.size) return undefined;
    // Pins never leave: where they start is as it was.
    for (const pin of forgotten.pins) {
      const start = hierarchy.starts.get(pin.path);
      if (start !== undefined) starts!.set(pin.path, start);
    }
  }
  return starts === undefined ? hierarchy : { ...hierarchy, starts };
}

/** The store's view the hierarchy is computed from (answers synchronously when it already knows). */
export interface ChainSource {
  resolveStart(path: string, isFile: boolean): string | undefined | Promise<string | undefined>;
  chainOf(startDir: string): readonly FileVersion[] | Promise<readonly FileVersion[]>;
  walkOf(startDir: string): readonly string[];
}

/**
 * The hierarchy for `touches` (oldest first) with `sessionDir` as the oldest of all, then the `pins`
 * (a pinned directory brings its chain, a pinned file only itself). Known answers are taken as they
 * are: only what is new costs a promise. `before`, the hierarchy of a subset of these touches and the
 * same pins as of the source's current state (the caller's to know), lends what it learned: where its
 * paths start, and the directories its walks visit. Its priorities are not reused: they are computed
 * again, so the result is the same with or without it (in a 2,000-directory session a new directory
 * then costs a few milliseconds less). `holding` is told the directories of each walk not lent (with
 * its start) before its chain is read: a session that holds them then has them watched before their
 * reads, and their records kept with the held ones from the start.
 */
export async function hierarchyOf(
  source: ChainSource,
  sessionDir: string,
  touches: readonly ToolPath[],
  pins: readonly ToolPath[] = [],
  before?: Hierarchy,
  holding?: (dirs: readonly string[], startDir: string) => void,
): Promise<Hierarchy> {
  const newestFirst = [...touches].reverse();
  newestFirst.push({ path: sessionDir, isFile: false });
  const all = [...newestFirst, ...pins];
  const resolving: (string | undefined | Promise<string | undefined>)[] = [];
  await inSlices(all, SLICE_MS, (touch) => void resolving.push(before?.starts.get(touch.path) ?? source.resolveStart(touch.path, touch.isFile)));
  const starts = await settle(resolving);
  const startByPath = new Map<string, string>();
  const startDirs: string[] = [];
  const seenStart = new Set<string>();
  const fileOnly = new Set<string>();
  const pinned = new Set<string>();
  all.forEach((touch, i) => {
    const start = starts[i];
    if (start === undefined) return;
    startByPath.set(touch.path, start);
    const isPin = i >= newestFirst.length;
    if (!seenStart.has(start)) {
      seenStart.add(start);
      startDirs.push(start);
      if (isPin) pinned.add(start);
      if (isPin && touch.isFile) fileOnly.add(start);
    } else if (!(isPin && touch.isFile)) fileOnly.delete(start);
  });
  // Its directories are those of its start directories' walks: taken whole only when each of those is a start directory here too.
  const lent = before !== undefined && everyIn(before.startDirs, seenStart) ? before : undefined;
  // Every new walk held before any chain is read.
  if (holding !== undefined) await inSlices(startDirs, SLICE_MS, (dir) => void (lent?.startDirs.has(dir) !== true && holding(source.walkOf(dir), dir)));
  const asked: (readonly FileVersion[] | Promise<readonly FileVersion[]>)[] = [];
  await inSlices(startDirs, SLICE_MS, (dir) => void asked.push(source.chainOf(dir)));
  const chains = await settle(asked);
  const files: FileVersion[] = [];
  const tiers: number[] = [];
  const byPath = new Map<string, FileVersion>();
  const dirSet = new Set<string>(lent?.dirSet);
  const manual = new Set<string>();
  const closest = new Set<string>();
  let tier = 0;
  startDirs.forEach((dir, i) => {
    if (lent?.startDirs.has(dir) !== true) for (const visited of source.walkOf(dir)) dirSet.add(visited);
    const chain = chains[i]!;
    const nearest = chain[chain.length - 1];
    if (nearest !== undefined && !(fileOnly.has(dir) && nearest.dir !== dir)) closest.add(nearest.path);
    let added = false;
    for (let j = chain.length - 1; j >= 0; j--) {
      const file = chain[j]!;
      if (byPath.has(file.path) || (fileOnly.has(dir) && file.dir !== dir)) continue;
      byPath.set(file.path, file);
      files.push(file);
      tiers.push(tier);
      if (pinned.has(dir)) manual.add(file.path);
      added = true;
    }
    if (added) tier++;
  });
  const ownChains = startDirs.map((dir, i) => (fileOnly.has(dir) ? chains[i]!.filter((file) => file.dir === dir) : chains[i]!));
  return { files, tiers, byPath, dirSet, starts: startByPath, startDirs: seenStart, pinnedStarts: pinned, manual, closest, chains: ownChains };
}

function everyIn<T>(items: ReadonlySet<T>, set: ReadonlySet<T>): boolean {
  for (const item of items) if (!set.has(item)) return false;
  return true;
}

/** The values of `items`, awaiting only those that are promises. */
export async function settle<T>(items: readonly (T | Promise<T>)[]): Promise<T[]> {
  return items.some((item) => item instanceof Promise) ? Promise.all(items) : (items as T[]);
}
