import { lstatSync, mkdtempSync, realpathSync, rmSync, statSync, unlinkSync, watch, writeFileSync, type FSWatcher } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join, relative, sep } from "node:path";
import type { LRUCache } from "lru-cache";
import type { Logger } from "../log.ts";
import { lruCache } from "../lru.ts";
import { isInside, realPathOr, relativePosix } from "../paths.ts";
import { lowerBound, prefixRun } from "../sorted.ts";
import { inSlices } from "../turns.ts";
import { RACY_MS, readContained, type FileVersion, type Skip } from "./contained.ts";
import { textBytes } from "./version.ts";
import { Inotify, type DirWatch, type InotifyUser } from "./inotify.ts";
import { RecordCache, type Holding } from "./records.ts";
import { chainOfWalk, walkUp } from "./walk.ts";
import { outOfReach } from "./worktree-index.ts";
import { contextNamesOf } from "./names.ts";

export interface FileStoreOptions {
  /** The walk's upper bound; resolved to its real path once. */
  worktree: string;
  /** Names looked for in each directory; the first readable one wins. */
  fileNames: readonly string[];
  maxFileBytes: number;
  /** Levels a walk climbs above its start directory at most. */
  maxDepth: number;
  /** Freshness by watch events + barrier; `false`: sync stats of the requested directories at every settle. */
  watch: boolean;
  /**
   * Where watch events come from: "inotify" (the default) reads Linux's queue synchronously, an exact
   * barrier with no wait; "fs.watch" (used where inotify is not available) is Bun's watcher with a
   * sentinel barrier. See inotify.ts.
   */
  events?: "inotify" | "fs.watch";
  /** Directories watched at most; the others are stat'd at every settle that asks for them. */
  maxWatchedDirs: number;
  /** Bytes of directory records kept at most (least recently used evicted first). Default DEFAULT_CACHE_BYTES. */
  maxCacheBytes?: number;
  /** Directories whose context files never load (git-ignored: node_modules, build output). */
  isIgnored?: (dir: string) => boolean;
  /**
   * A base or override file that must not load because git ignores it (its name came from the
   * fileNames option, which a project's opencode.json may set: `.env` must not reach the prompt).
   */
  isIgnoredFile?: (path: string) => boolean;
  /** A context file name in a watched directory changed (created, edited, deleted): the worktree catalog may care. */
  onCandidate?: (path: string) => void;
  log: Logger;
}

/** How a candidate name relates to its base name: `AGENTS.override.md` replaces `AGENTS.md`, `AGENTS.local.md` follows it. */
export interface Candidate {
  readonly name: string;
  readonly kind: "override" | "base" | "local";
}

/**
 * The names looked for in each directory, in the order they are tried: for each base name its
 * override then itself (the first that exists is the directory's file), then the local variants
 * (the first that exists follows it).
 */
export function candidatesOf(fileNames: readonly string[]): readonly Candidate[] {
  // The variants' names as the worktree index lists them (one rule: the extension becomes .md).
  const seen = new Set<string>();
  const once = (candidate: Candidate) => !seen.has(candidate.name) && seen.add(candidate.name) !== undefined;
  return [
    ...fileNames.flatMap((name): Candidate[] => [
      { name: contextNamesOf([name]).override[0]!, kind: "override" },
      { name, kind: "base" },
    ]),
    ...contextNamesOf(fileNames).local.map((name): Candidate => ({ name, kind: "local" })),
  ].filter(once);
}

/** What one directory holds, read once per version. */
export interface DirectoryRecord {
  readonly dir: string;
  /** A real directory (not a symlink, not gone) when it was read. */
  readonly exists: boolean;
  readonly file: FileVersion | null;
  /** A personal `<stem>.local.md` (it may itself be git-ignored): it follows `file`. */
  readonly local: FileVersion | null;
  /** Candidates passed over, and why. */
  readonly skipped: readonly Skip[];
}

/**
 * 32 MiB (option maxCacheBytes) of the records no session holds (a held directory's record is kept
 * while it is held): a typical context file is 1-8 KB, kept packed in a third of that or less
 * (version.ts), so such a record costs 1-3 KB with its paths, and 32 MiB keeps over 10,000 typical
 * files, or 128 of incompressible text at the 128 KiB maxFileBytes cap. Past it, what was used least
 * recently is read again.
 */
export const DEFAULT_CACHE_BYTES = 32 * 1024 * 1024;

/**
 * (fs.watch only; inotify drops nothing.) Bun drops watch events: one arriving within ~1 ms of the previous one passed for the same watch,
 * and, measured under a tight edit/settle loop on Bun 1.4.5, writes up to ~6 ms after the last event
 * it passed (while its watcher thread lags, sentinel events then taking 3-5 ms). So a directory stays
 * dirty, and is stat'd at every settle, until a check ran this long after its last event: 5 ms let
 * 1-4 of 1,000 timed edits through; 50 ms none over repeated runs with gaps of 0-60 ms. Only
 * directories being edited pay for it.
 */
const QUIET_MS = 50;
/** The sentinel's event not arriving in this long means the watcher cannot be trusted: sync stats for good. */
const BARRIER_TIMEOUT_MS = 100;
/** Reads of directories not known yet run in slices this long at most, so a cold start never stalls the loop. */
const SLICE_MS = 4;
/**
 * Calls that follow one another with no turn of the event loop extend a slice until it is this long.
 * Longer would spare a step its wait for a turn (0.5-2.5 ms measured), but steps run back to back
 * would then hold the loop for longer stretches: with 10 ms the start-up probe's largest stall went from
 * 19.4 to 21.9 ms (medians of 8 fresh processes each, alternating), past the 20 ms a stall is.
 */
const UNYIELDED_MS = 5;
/** Start resolutions and chains remembered at most (both are cheap to compute again). */
const MAX_STARTS = 16384;
const MAX_CHAINS = 8192;
/** Watch failures that concern the whole watcher (out of inotify watches or descriptors), not one directory. */
const SYSTEMIC = new Set(["ENOSPC", "EMFILE", "ENFILE"]);

interface Record_ extends DirectoryRecord {
  /** Stat signature taken just before the read: the directory's identity and each candidate name's. */
  readonly signature: string;
  /** Read again at the next check whatever the signature says (a transient failure, or a racy read). */
  readonly retry: boolean;
  /**
   * When the record was last known to match the disk (performance.now() just before the stat of its
   * read, or of a check that found it unchanged; -Infinity once a structure change voids that): a
   * check for changes saved before then has nothing to do. Kept on the record, not in a map of
   * directories beside it (640 KB of hash table at 4,858 directories): the only field that changes.
   */
  verifiedAt: number;
}

interface Start {
  readonly dir: string | undefined;
  /** The last symlink below the worktree on its path: resolved again at each check (a retarget makes no event where the start is). */
  readonly link?: string;
  /** The first directory below `dir` that did not exist, or the file where the path went on: a directory made there changes where the walk starts. */
  readonly missing?: string;
}

/** A directory watched or held: while held (refs above zero), its record lives here too (see RecordCache). */
interface Watched extends Holding<Record_> {
  readonly dir: string;
  refs: number;
  handle: DirWatch | undefined;
}

interface Barrier {
  readonly name: string;
  /** When its sentinel was written (Infinity until then): every change saved before then is dispatched once it passes. */
  writtenAt: number;
  readonly done: Promise<void>;
  readonly resolve: () => void;
}

type Chain = readonly FileVersion[];

const OUTSIDE: Start = Object.freeze({ dir: undefined });
const RESOLVED = Promise.resolve();
const EMPTY_CHAIN: Chain = Object.freeze([]);

/**
 * The one store of context files serving every session: directory records read once per version
 * (bounded in bytes), the chain of files for each start directory, where a touched path's walk
 * starts, and one freshness mechanism (a watch per retained directory + a barrier before each step:
 * inotify read synchronously where it can, fs.watch and a sentinel elsewhere).
 */
export class FileStore {
  /** Grows whenever a record's file or the structure changes: anything computed at an older value is stale. */
  generation = 0;
  readonly realRoot: string;
  private readonly worktree: string;
  private readonly candidates: readonly Candidate[];
  private readonly names: ReadonlySet<string>;
  private readonly records: RecordCache<Record_>;
  private readonly chains = lruCache<string, Chain>(MAX_CHAINS, { disposeAfter: (_chain, start) => this.unindexChain(start) });
  /**
   * The start directories of the cached chains, sorted: a chain's walk goes up from its start, so
   * those through a directory are that directory and one run of those under it (what a changed
   * record invalidates, found by a binary search). A map of each directory to the chains through it
   * held 2.3 MB for a 2,000-directory session.
   */
  private readonly chainStarts: string[] = [];
  /** While dropChains runs: the starts whose chains it deleted, taken out of chainStarts together at its end. */
  private unindexing: Set<string> | undefined;
  private readonly pendingChains = new Map<string, Promise<Chain>>();
  private readonly walks = lruCache<string, readonly string[]>(MAX_STARTS);
  private readonly starts: LRUCache<string, Start>;
  /** Missing directories remembered by start resolutions (refcounted), by parent. */
  private readonly missing = new Map<string, number>();
  private readonly missingByParent = new Map<string, Set<string>>();
  /** The symlinks cached starts go through (see recheckLinks): where each one resolved to (undefined: nowhere), and how many starts go through it. */
  private readonly links = new Map<string, { readonly real: string | undefined; starts: number }>();

  private readonly watched = new Map<string, Watched>();
  /** Held directories without a working watch (not started yet, past maxWatchedDirs, or closed): a settle stats them. */
  private readonly unwatched = new Set<string>();
  /** Held directories whose watch start found the store full (and only that): a watch closed makes room for them (offerRoom). */
  private readonly awaitingRoom = new Set<string>();
  /** Directories watched before their first read and held by nobody yet (see watchBeforeRead). */
  private readonly unclaimed = new Set<string>();
  private unclaimedSweep = false;
  private roomOffered = false;
  private readonly owners = new Map<string, Set<string>>();
  private activeWatches = 0;
  /** Directory → time (performance.now) of its last event; present while it must be checked. */
  private readonly dirty = new Map<string, number>();
  /** Watched directories whose watch may have died unseen (events were lost): asked of the kernel at their next check. */
  private readonly unverified = new Set<string>();
  /**
   * Directories whose context file a watch on them cannot vouch for: reached through a symlink (its
   * target's path may go through other links, repointed without an event here), or with other hard
   * links (edited in place through another directory). Stat'd at every check, as unwatched ones are.
   */
  private readonly alwaysDue = new Set<string>();

  private mode: "watch" | "sync";
  /** Linux's event queue, read synchronously (the barrier is a drain); undefined: fs.watch and a sentinel. */
  private inotify: Inotify | undefined;
  private readonly inotifyUser: InotifyUser = { drained: () => this.flushStructureLater(), overflowed: () => this.overflowed() };
  /**
   * Paths whose structure changed, handled together (flushStructure): at the start and end of a
   * check, and after an idle inotify drain (in a slice of its own). A branch switch replaces thousands of directories; one pass over the store's
   * state for each was 3 s of blocked loop at 3,000.
   */
  private pendingStructure: Set<string> | undefined;
  /** A background slice is queued to handle pendingStructure (see flushStructureLater). */
  private structureQueued = false;
  /** How long a directory stays dirty after its last event (see QUIET_MS): 0 when no event is ever dropped. */
  private readonly quietMs: number;
  private sentinelDir: string | undefined;
  private sentinelWatch: FSWatcher | undefined;
  private readonly barriers = new Map<string, Barrier>();
  /** When the sentinel of the latest barrier that passed was written. */
  private passedAt = -Infinity;
  private latest: Barrier | undefined;
  private barrierSeq = 0;
  private readonly timers = new Set<ReturnType<typeof setTimeout>>();
  private readonly unlinks: string[] = [];

  /** Reads a call waits for, in order. */
  private readonly queue: (() => void)[] = [];
  /** Work no call waits for (watches to start): run in slices once no read is queued. */
  private readonly background: (() => void)[] = [];
  /** When the current slice began and when it ends (performance.now()). */
  private sliceStart = -Infinity;
  private sliceEnd = 0;
  private sliceTimer: ReturnType<typeof setImmediate> | undefined;
  private disposed = false;

  constructor(private readonly options: FileStoreOptions) {
    this.worktree = options.worktree;
    this.realRoot = realPathOr(options.worktree);
    this.candidates = candidatesOf(options.fileNames);
    this.names = new Set(this.candidates.map((candidate) => candidate.name));
    this.mode = options.watch ? "watch" : "sync";
    this.inotify = options.watch && options.events !== "fs.watch" ? Inotify.acquire(this.inotifyUser) : undefined;
    this.quietMs = this.inotify === undefined ? QUIET_MS : 0;
    // An evicted version must not live on in a cached chain, or the bound would be a fiction.
    this.records = new RecordCache<Record_>(
      options.maxCacheBytes ?? DEFAULT_CACHE_BYTES,
      sizeOf,
      (dir) => {
        this.alwaysDue.delete(dir);
        this.dropChainsThrough(dir);
      },
      // Held directories: pinned from hold (its first ref) to letGo (its last), their records kept in their entries.
      this.watched,
    );
    this.starts = lruCache<string, Start>(MAX_STARTS, {
      disposeAfter: (start) => {
        if (start.missing !== undefined) this.forgetMissing(start.missing);
        if (start.link !== undefined) this.linkLetGo(start.link);
      },
    });
  }

  /**
   * The directories a walk from `startDir` (a real directory) visits, closest first. Like every array
   * the plugin hands on (chains, candidates, lists of a contract, a plan's decisions), typed readonly
   * but not frozen: JavaScriptCore keeps a frozen array in sparse mode, a hash map, which measured 5x
   * slower to iterate and about 200 bytes more per array (walks and chains are gone over every step).
   */
  walkOf(startDir: string): readonly string[] {
    let walk = this.walks.get(startDir);
    if (walk === undefined) {
      // A directory already recorded is named by its record's string: each walk through it made a
      // copy of its own (a 2,000-directory session's walks held 13,448 strings for 4,858 directories).
      walk = walkUp(startDir, this.realRoot, this.options.maxDepth).map((dir) => this.records.peek(dir)?.dir ?? dir);
      this.walks.set(startDir, walk);
    }
    return walk;
  }

  /**
   * Where the walk for a touched path starts, as a real directory: a directory starts at itself (even
   * when a file argument names it, as `read` of a directory does), a file at its parent, a missing path
   * at its nearest existing ancestor (the first missing directory is remembered, so its creation is
   * noticed). Undefined when outside the worktree once symlinks are resolved. Cached until a structure
   * change touches it.
   */
  resolveStart(touchedPath: string, isFile: boolean): string | undefined {
    const key = (isFile ? "f" : "d") + touchedPath;
    let start = this.starts.get(key);
    if (start === undefined) {
      start = this.computeStart(touchedPath, isFile);
      if (start.missing !== undefined) this.rememberMissing(start.missing);
      this.starts.set(key, start);
      if (start.link !== undefined) this.linkUsed(start.link);
    }
    return start.dir;
  }

  /** What is known of `dir` (no read): for explaining, and for tests. */
  recordOf(dir: string): DirectoryRecord | undefined {
    return this.records.peek(dir);
  }

  /**
   * The files that apply to `startDir` (a value of resolveStart), root first. Synchronous when every
   * directory of its walk is known, else a Promise (the reads run in short slices). Cached until a
   * change touches a directory of the walk.
   */
  chainOf(startDir: string): Chain | Promise<Chain> {
    if (this.disposed) return EMPTY_CHAIN;
    const known = this.chains.get(startDir) ?? this.pendingChains.get(startDir);
    if (known !== undefined) return known;
    const now = this.queue.length === 0 && this.hasBudget() ? this.assemble(startDir, "budget") : this.assemble(startDir, "none");
    if (now !== undefined) return now;
    const pending = new Promise<Chain>((resolve) => {
      const attempt = (): void => {
        const chain = this.disposed ? EMPTY_CHAIN : this.assemble(startDir, "one");
        if (chain === undefined) return this.enqueue(attempt);
        this.pendingChains.delete(startDir);
        resolve(chain);
      };
      this.enqueue(attempt);
    });
    this.pendingChains.set(startDir, pending);
    return pending;
  }

  /**
   * `owner` (a session) depends on `dirs`: they are watched while any owner does (up to
   * maxWatchedDirs). Adds to what the owner retained before; `release` lets go of all of it.
   */
  retain(owner: string, dirs: Iterable<string>): void {
    if (this.disposed) return;
    let mine = this.owners.get(owner);
    if (mine === undefined) {
      mine = new Set();
      this.owners.set(owner, mine);
    }
    for (const dir of dirs) {
      if (mine.has(dir)) continue;
      mine.add(dir);
      this.hold(dir);
    }
  }

  /**
   * Lets go of everything `owner` retained (a deleted session); a directory nobody holds is unwatched.
   * In slices: a 2,000-directory session holds about 5,000 directories, and letting go of them (each
   * unwatched, its record back in the bounded cache, which evicts) held the loop for 43-55 ms in one
   * task. A directory retained again meanwhile (a session of the same id, another one) keeps its watch:
   * each retain holds it once more.
   */
  async release(owner: string): Promise<void> {
    const mine = this.owners.get(owner);
    if (mine === undefined) return;
    this.owners.delete(owner);
    // One directory that cannot be let go of (rethrown at the end, for the caller to log) keeps no other.
    let failure: { error: unknown } | undefined;
    await inSlices(mine, SLICE_MS, (dir) => {
      if (this.disposed) return false;
      try {
        this.letGo(dir);
      } catch (error) {
        failure ??= { error };
      }
    });
    if (failure !== undefined) throw failure.error;
  }

  /**
   * A watch closed and made room: held directories whose watch start found the store full (a session
   * retained while another's release was under way, or while others held maxWatchedDirs) get one in
   * the background's slices, not in the next step's settle. Only those: a directory that cannot be
   * watched (gone, a symlink) would take the room and cost a start each time. Once per run of closes.
   */
  private offerRoom(): void {
    if (this.awaitingRoom.size === 0 || this.roomOffered || this.mode !== "watch" || this.disposed) return;
    this.roomOffered = true;
    this.enqueue(() => {
      this.roomOffered = false;
      let room = this.options.maxWatchedDirs - this.activeWatches;
      for (const dir of this.awaitingRoom) {
        if (room <= 0) return;
        this.awaitingRoom.delete(dir);
        const held = this.watched.get(dir);
        if (held === undefined || held.refs === 0 || held.handle !== undefined) continue;
        this.enqueue(() => this.startHeldWatch(dir, held), this.background);
        room--;
      }
    }, this.background);
  }

  /**
   * Brings what is known of `dirs` up to date with the disk as of the call: every change saved before
   * it is seen by the chains asked for after it resolves. With a working watcher: a barrier (all events
   * queued before it are dispatched), then sync stats of dirty and unwatched directories only; without:
   * sync stats of `dirs`. What changed is read again. Given as a Set, `dirs` must be retained (held
   * directories are the ones a watch or the unwatched list accounts for): the engine retains a
   * hierarchy's directories before it settles them. `since` (a performance.now() time) asks only for
   * the changes saved before it: a barrier written since then that has passed vouches for them (the
   * parallel tool calls of a step, settled one after another, share one barrier).
   */
  settle(dirs: Iterable<string>, since = Infinity): Promise<void> {
    if (this.disposed) return RESOLVED;
    if (this.mode === "sync") return this.check(dirs, true, since);
    // A drain made now has every change saved before now (`since` is never later than that).
    if (this.inotify !== undefined) {
      if (this.passedAt >= since) return this.check(dirs, false, since);
      return this.drain(since).then(() => this.check(dirs, false, since));
    }
    if (this.passedAt >= since) return this.check(dirs, false, since);
    return this.barrier(since).then(() => this.check(dirs, this.mode === "sync", since));
  }

  /**
   * A call beginning at `since`: with fs.watch, starts now the barrier that its later settle waits
   * for, so that the watcher's hop (about a millisecond) overlaps the work done before that settle
   * (a new chain's reads); inotify's barrier is a drain in the settle itself. And the call's reads
   * get a slice (below).
   */
  prepare(since: number): void {
    if (this.disposed) return;
    // A call that began after the current slice did may follow the last call with no turn of the
    // event loop between them (inotify's barrier needs none): it gets SLICE_MS of its own, after the
    // reads queued before it (not the background's watches), as long as the loop has not gone
    // UNYIELDED_MS without a turn. Past that its reads wait for the next turn, and the loop turns.
    if (this.sliceTimer !== undefined && this.sliceStart < since && performance.now() - this.sliceStart < UNYIELDED_MS) {
      this.sliceEnd = performance.now() + SLICE_MS;
      this.runQueued(false);
    }
    if (this.mode === "watch" && this.inotify === undefined && this.passedAt < since) void this.barrier(since);
  }

  /** Whether a file name is one of the context file names (a base name or one of its variants). */
  isCandidateName(name: string): boolean {
    return this.names.has(name);
  }

  /** Where watch events come from; undefined without a watcher (sync stats). */
  get events(): "inotify" | "fs.watch" | undefined {
    return this.mode === "sync" ? undefined : this.inotify !== undefined ? "inotify" : "fs.watch";
  }

  /** How the store stands: for the benchmark, explain and tests. */
  get stats(): { mode: "watch" | "sync"; events: "inotify" | "fs.watch" | undefined; watched: number; dirty: number; records: number; bytes: number; owners: number; barriers: number } {
    return { mode: this.mode, events: this.events, watched: this.activeWatches, dirty: this.dirty.size, records: this.records.size, bytes: this.records.looseBytes, owners: this.owners.size, barriers: this.barrierSeq };
  }

  /** Closes every watch (and the inotify descriptor or the sentinel directory), clears timers. Nothing is read afterwards. */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const entry of this.watched.values()) this.unwatch(entry);
    this.watched.clear();
    this.unclaimed.clear();
    this.awaitingRoom.clear();
    this.owners.clear();
    this.inotify?.release(this.inotifyUser);
    this.closeSentinel();
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    if (this.sliceTimer !== undefined) clearImmediate(this.sliceTimer);
    // Whoever waits on a queued read is answered (with nothing): the store is closed.
    for (const work of this.queue.splice(0)) work();
    this.background.length = 0;
    this.records.clear();
    this.dropChains([...this.chains.keys()]);
    this.starts.clear();
    this.dirty.clear();
  }

  // ---- chains and records ----

  /**
   * The chain from the records, reading the missing ones: none ("none"), while this turn's slice
   * lasts ("budget"), or at least one then while the slice lasts ("one", from a queued slice, so every
   * slice makes progress). Undefined when a record is still missing. Cached only when every record
   * it was built from is kept (a record too large for the byte bound is not).
   */
  private assemble(startDir: string, load: "none" | "budget" | "one"): Chain | undefined {
    const found: (FileVersion | null)[] = [];
    let loaded = 0;
    let cacheable = true;
    for (const dir of this.walkOf(startDir)) {
      let record = this.records.get(dir);
      if (record === undefined) {
        if (load === "none" || (performance.now() >= this.sliceEnd && !(load === "one" && loaded === 0))) return undefined;
        this.watchBeforeRead(dir);
        record = this.readDir(dir);
        this.install(dir, undefined, record);
        loaded++;
        if (!this.records.has(dir)) cacheable = false;
      }
      // Closest first: the local variant follows the directory's file, so it comes before it here.
      if (record.local !== null) found.push(record.local);
      found.push(record.file);
      if (record.file?.root === true) break;
    }
    const chain = chainOfWalk(found);
    if (cacheable) {
      this.chains.set(startDir, chain);
      const at = lowerBound(this.chainStarts, startDir);
      if (this.chainStarts[at] !== startDir) this.chainStarts.splice(at, 0, startDir);
    }
    return chain;
  }

  private unindexChain(startDir: string): void {
    if (this.unindexing !== undefined) return void this.unindexing.add(startDir);
    const at = lowerBound(this.chainStarts, startDir);
    if (this.chainStarts[at] === startDir) this.chainStarts.splice(at, 1);
  }

  /** Drops the cached chains of `starts`, and their starts from chainStarts in one pass (a splice each was quadratic: 8,000 chains through the root). */
  private dropChains(starts: Iterable<string>): void {
    const dropped = (this.unindexing = new Set());
    try {
      for (const start of starts) this.chains.delete(start);
    } finally {
      this.unindexing = undefined;
      if (dropped.size > 0) {
        let kept = 0;
        for (const start of this.chainStarts) if (!dropped.has(start)) this.chainStarts[kept++] = start;
        this.chainStarts.length = kept;
      }
    }
  }

  private dropChainsThrough(dir: string): void {
    const { from, to } = prefixRun(this.chainStarts, dir.endsWith(sep) ? dir : dir + sep);
    // A walk goes up maxDepth levels at most: a start under the directory goes through it only if it is that close.
    const through = this.chainStarts.slice(from, to).filter((start) => levelsBelow(start, dir) <= this.options.maxDepth);
    if (this.chainStarts[lowerBound(this.chainStarts, dir)] === dir) through.push(dir);
    // The starts are taken first: deleting a chain unindexes it (disposeAfter).
    this.dropChains(through);
  }

  /** Keeps `fresh` for `dir`, reusing the previous file version when the bytes are the same. */
  private install(dir: string, previous: Record_ | undefined, fresh: Record_): void {
    const same = (before: FileVersion | null, after: FileVersion | null) =>
      before === after || (before !== null && after !== null && before.sha256 === after.sha256 && before.path === after.path && before.size === after.size);
    const file = previous !== undefined && same(previous.file, fresh.file) ? previous.file : fresh.file;
    const local = previous !== undefined && same(previous.local, fresh.local) ? previous.local : fresh.local;
    const record = file === fresh.file && local === fresh.local ? fresh : { ...fresh, file, local };
    if (previous !== undefined && (file !== previous.file || local !== previous.local)) {
      this.generation++;
      this.dropChainsThrough(dir);
      // However the change was found (an event, or a stat of a directory whose watch is not set up
      // yet or that is not watched), the catalog hears of it.
      const [before, after] = [previous.signature.split("|"), fresh.signature.split("|")];
      this.candidates.forEach(({ name }, i) => {
        if (before[i + 1] !== after[i + 1]) this.tellCandidate(dir + sep + name);
      });
    }
    this.records.set(dir, record);
    // A failure that passes with no change to the file (EMFILE, EIO, ...) makes no event: such a
    // directory stays dirty, watched or not, and is read again at each check until the read is clean.
    // A racy read or a refused permission needs none: a later write or chmod makes an event.
    if (record.skipped.some((skip) => skip.unannounced === true)) this.markDirty(dir);
    // A context file that is a symlink to another directory's file, or to a file of another name here
    // (AGENTS.md -> GUIDE.md): an edit of its target makes no event a watch on it would take for it.
    // Nor does its target's making, for a name that is a symlink and gave no file (dangling, leading
    // out of the worktree, or to something not a file): its way may change anywhere.
    const indirect = (version: FileVersion | null) => version !== null && (dirname(version.path) !== dir || !this.names.has(basename(version.path)));
    if (indirect(record.file) || indirect(record.local) || record.signature.includes(":linked") || record.signature.includes(":symlink")) this.alwaysDue.add(dir);
    else this.alwaysDue.delete(dir);
  }

  private readDir(dir: string): Record_ {
    const startedAt = Date.now();
    const readAt = performance.now();
    const signature = this.signatureOf(dir);
    this.quiet(dir, readAt);
    // Not frozen, unlike the versions it holds: verifiedAt moves on with each check that finds it unchanged.
    if (this.disposed || !signature.startsWith("d")) return { dir, exists: false, file: null, local: null, skipped: [], signature, retry: false, verifiedAt: readAt };
    const { maxFileBytes, log } = this.options;
    const ignored = this.options.isIgnored?.(dir) === true;
    const skipped: Skip[] = [];
    let file: FileVersion | null = null;
    let local: FileVersion | null = null;
    let racy = false;
    // The signature's stat of each name, in candidate order: a name it found absent is not opened (most are).
    const stats = signature.split("|").slice(1);
    const skip = (refused: Skip) => {
      skipped.push(refused);
      log.once(`skip:${refused.path}:${refused.reason}`, "warn", `skipped ${refused.path}: ${refused.reason}`);
    };
    for (const [i, candidate] of this.candidates.entries()) {
      // An ignored directory (node_modules, build output) loads nothing, not even a local variant a package might ship.
      if (ignored || stats[i] === "-" || (candidate.kind === "local" ? local !== null : file !== null)) continue;
      if (candidate.kind !== "local" && this.options.isIgnoredFile?.(dir + sep + candidate.name) === true) {
        skip(Object.freeze({ path: dir + sep + candidate.name, reason: "git ignores it (a name added by the fileNames option loads only when git does not ignore its file)", transient: false }));
        continue;
      }
      const outcome = readContained(dir + sep + candidate.name, dir, this.realRoot, maxFileBytes);
      if (outcome.kind === "absent") continue;
      if (outcome.kind === "skip") {
        skip(outcome.skip);
        continue;
      }
      const { version, notes } = outcome;
      // A name that is a link (NOTES.md -> .env, AGENTS.local.md -> ../.env): the file read is judged too, or a
      // committed link hands over what git ignores. A local variant loads ignored only as itself (or a link to a local variant of its name).
      const linkedAway = version.path !== dir + sep + candidate.name && !(candidate.kind === "local" && basename(version.path) === candidate.name);
      if (linkedAway && this.options.isIgnoredFile?.(version.path) === true) {
        skip(Object.freeze({ path: dir + sep + candidate.name, reason: `it leads to ${version.rel}, which git ignores (a file git ignores loads only by a default name, or as a local variant itself)`, transient: false }));
        continue;
      }
      for (const note of notes) log.once(`note:${version.path}:${version.sha256}:${note}`, "warn", `${version.path}: ${note}`);
      racy ||= startedAt - outcome.changedMs < RACY_MS;
      if (candidate.kind === "local") local = version;
      else file = version;
    }
    return { dir, exists: true, file, local, skipped, signature, retry: racy || skipped.some((s) => s.transient), verifiedAt: readAt };
  }

  /**
   * "d<ino>" for a real directory (a symlink or anything else is "x", a missing one "-"), then per
   * candidate name what stat (following links, so a retargeted or edited link target shows) says.
   */
  private signatureOf(dir: string): string {
    let signature: string;
    try {
      const info = lstatSync(dir, { throwIfNoEntry: false });
      if (info === undefined) return "-";
      if (!info.isDirectory()) return "x";
      signature = `d${info.ino}`;
    } catch {
      return "-";
    }
    for (const { name } of this.candidates) {
      const path = dir + sep + name;
      // ":symlink": the name is a link, dangling or leading out maybe (see alwaysDue). Not a second
      // stat for the names that are not links (most are absent).
      let link = false;
      try {
        let info = lstatSync(path, { throwIfNoEntry: false });
        link = info?.isSymbolicLink() === true;
        if (link) info = statSync(path, { throwIfNoEntry: false });
        // ":linked": the file has other hard links (see alwaysDue).
        signature += info === undefined ? "|-" : `|${info.ino}:${info.size}:${info.mtimeMs}:${info.ctimeMs}:${info.isFile() ? "f" : "o"}${info.nlink > 1 ? ":linked" : ""}`;
      } catch (error) {
        signature += `|!${(error as NodeJS.ErrnoException).code ?? ""}`;
      }
      if (link) signature += ":symlink";
    }
    return signature;
  }

  // ---- freshness ----

  /**
   * Stats the directories of `dirs` that need it (all, or the dirty and unwatched ones) and reads again
   * what changed. Directories are checked synchronously; re-reads run in slices and are awaited. One
   * read or checked since `since` has every change saved before it (a new chain's directories, and
   * those a parallel call of the step checked already): it is not stat'd again, and stays dirty or
   * unwatched for the settles that follow.
   */
  private async check(dirs: Iterable<string>, all: boolean, since: number): Promise<void> {
    if (this.disposed) return;
    // A drain that dispatched a checkout's events (12,000 for 1,500 directories deleted and made again)
    // spent the slice: the structure pass over the store's state waits for the next one.
    if (this.pendingStructure !== undefined && !this.hasBudget()) await this.sliced(() => undefined);
    if (this.disposed) return;
    // What events reported since the last check (fs.watch's come one by one) marks what is due.
    this.flushStructure();
    this.recheckLinks();
    this.flushStructure();
    let rereads: Promise<unknown>[] | undefined;
    let due = all ? dirs : this.needingCheck(dirs);
    // A directory found replaced voids what was verified below it (the watches there followed the
    // old one): those are checked again in this check, twice more at most.
    for (let pass = 0; ; pass++) {
      for (const dir of due) {
        // Each directory is stat'd after `since` whatever the slice: a checkout that changed 1,500 of
        // them (33 ms of stats) waits for later slices rather than holding the event loop.
        if (!this.hasBudget()) await this.sliced(() => undefined);
        if (this.disposed) return;
        const reread = this.checkDir(dir, since);
        if (reread !== undefined) (rereads ??= []).push(reread);
      }
      if (this.pendingStructure === undefined || pass === 2) break;
      this.flushStructure();
      due = this.needingCheck(dirs);
    }
    this.flushStructure();
    if (rereads !== undefined) await Promise.all(rereads);
  }

  /**
   * Of `dirs`, those a watch does not vouch for: dirty ones (until a check verifies them, see
   * `verified`), unwatched ones, and those whose context file it cannot see (alwaysDue).
   * Given a Set of held directories (a session's hierarchy, retained before it is settled), they are
   * found from the few dirty and unwatched ones rather than by visiting thousands of quiet ones.
   */
  private needingCheck(dirs: Iterable<string>): Set<string> {
    const due = new Set<string>();
    if (dirs instanceof Set) {
      for (const set of [this.dirty.keys(), this.unwatched, this.alwaysDue]) for (const dir of set) if (dirs.has(dir)) due.add(dir);
    } else {
      for (const dir of dirs) if (this.watched.get(dir)?.handle === undefined || this.dirty.has(dir) || this.alwaysDue.has(dir)) due.add(dir);
    }
    return due;
  }

  private checkDir(dir: string, since: number): Promise<unknown> | undefined {
    this.lookForMissing(dir);
    const record = this.records.peek(dir);
    if (record === undefined || (!record.retry && record.verifiedAt >= since)) return undefined;
    // A held directory not watched yet is watched first: the stat below then vouches for what came
    // before the watch, and with inotify it is not owed another check.
    const entry = this.watched.get(dir);
    if (this.mode === "watch" && entry !== undefined && entry.handle === undefined) this.startWatch(dir, entry);
    // After lost events, a directory made again on its old inode number has the same identity but lost its watch: asked of the kernel.
    if (this.unverified.delete(dir) && entry?.handle !== undefined && this.inotify?.alive(entry.handle) === false) this.structureChanged(dir);
    const checkedAt = performance.now();
    const signature = this.signatureOf(dir);
    if (signature === record.signature && !record.retry) {
      this.verified(record, checkedAt);
      return undefined;
    }
    if (identity(signature) !== identity(record.signature)) this.structureChanged(dir);
    return this.sliced(() => {
      if (this.disposed) return;
      const current = this.records.peek(dir);
      // Already read again since (by another settle, or a chain after a structure change).
      if (current !== undefined && current !== record && current.signature === this.signatureOf(dir) && !current.retry) return;
      this.install(dir, current, this.readDir(dir));
    });
  }

  /**
   * `record` matched the disk when a stat began at `at`: a check for changes saved before then has
   * nothing to do, and an event older than that (by the quiet window) is accounted for.
   */
  private verified(record: Record_, at: number): void {
    record.verifiedAt = at;
    this.quiet(record.dir, at);
  }

  /**
   * `dir` matched the disk when a stat began at `at` (a check found its record unchanged, or a read
   * begins): an event older than that by the quiet window is accounted for. An event is forgotten
   * only here, never when a check was skipped: a skipped check verified nothing.
   */
  private quiet(dir: string, at: number): void {
    const last = this.dirty.get(dir);
    if (last !== undefined && at - last >= this.quietMs) this.dirty.delete(dir);
  }

  /**
   * A directory on a chain (or the first missing one below a start) appeared, went, or was replaced:
   * where walks start and the chains below it are worked out again, the directories below it checked,
   * and their watches (which follow the old inodes) set up anew, for all such paths together
   * (flushStructure), when the check or the drain that found them ends.
   */
  private structureChanged(path: string): void {
    (this.pendingStructure ??= new Set()).add(path);
  }

  /**
   * After an idle inotify drain: what its events changed of the structure is worked out in a task of
   * its own, the next check's or the background's, not in the drain's (the settle's and the catalog's
   * drains tell no user; the check works it out): 1,500 directories deleted and made again, their 12,000 events and the pass over the
   * store's state in one task, blocked the event loop 25-42 ms.
   */
  private flushStructureLater(): void {
    if (this.pendingStructure === undefined || this.structureQueued || this.disposed) return;
    this.structureQueued = true;
    this.enqueue(() => {
      this.structureQueued = false;
      this.flushStructure();
    }, this.background);
  }

  /** What structureChanged says, for every pending path in one pass: each entry is asked by its ancestors. */
  private flushStructure(): void {
    const changed = this.pendingStructure;
    this.pendingStructure = undefined;
    if (changed === undefined || this.disposed) return;
    this.generation++;
    const under = (path: string | undefined) => path !== undefined && insideAny(path, changed);
    const stale: string[] = [];
    for (const [key, start] of this.starts.entries()) if (under(key.slice(1)) || under(start.dir) || under(start.missing)) stale.push(key);
    for (const key of stale) this.starts.delete(key);
    // The cached chains whose walk may visit a changed path: those starting at or below it.
    this.dropChains([...this.chains.keys()].filter(under));
    const now = performance.now();
    for (const [dir, entry] of this.watched) {
      if (!under(dir)) continue;
      this.unwatch(entry);
      this.dirty.set(dir, now);
    }
    for (const record of this.records.values()) {
      if (!under(record.dir)) continue;
      this.dirty.set(record.dir, now);
      record.verifiedAt = -Infinity;
    }
  }

  /** Tells the catalog a context file name at `path` may have changed; whatever its look throws is logged, not thrown. */
  private tellCandidate(path: string): void {
    try {
      this.options.onCandidate?.(path);
    } catch (error) {
      this.options.log.once(`candidate:${String(error)}`, "warn", `the worktree catalog could not look at ${path}: ${String(error)}`);
    }
  }

  /** Every inotify watch's listener (one function, not one per directory): it tells the directory going from an entry of the same name. */
  private readonly onDirEvent = (dir: string, name: string, self: boolean): void => this.onEvent(dir, name, self);

  /**
   * `self`: whether the event is the watched directory's own (inotify says); undefined with fs.watch,
   * which reports that under the directory's name, so an entry of that name counts as it too.
   */
  private onEvent(dir: string, filename: string | Buffer | null, self?: boolean): void {
    if (this.disposed) return;
    if (filename === null) return this.markDirty(dir);
    // The watched directory itself went (or was renamed): with inotify nothing else; a file named like
    // it (the binary `go build` writes into the module's root) was a structure pass over everything below.
    if (self === true) return this.structureChanged(dir);
    const name = String(filename);
    const child = dir === sep ? sep + name : dir + sep + name;
    if (this.names.has(name)) {
      // Dirty first: whatever the catalog's look at the file throws (a directory no longer
      // searchable), this directory is checked at the next settle.
      this.markDirty(dir);
      return this.tellCandidate(child);
    }
    // Handled at the end of the inotify drain dispatching the event (InotifyUser.drained), or when the
    // next check begins (fs.watch events come one by one; a step's hierarchy is worked out again
    // when its settle moves the generation).
    if (this.records.has(child) || this.watched.has(child) || this.startsBelow(child)) this.structureChanged(child);
    // A missing directory waited for (or a file where a path went on): only its making counts, not an edit of the file.
    else if (this.missing.has(child) && realAndStat(child)?.[1] === true) this.structureChanged(child);
    // fs.watch reports the watched directory itself going (or renamed) under its own name.
    if (self === undefined && name === basename(dir)) this.structureChanged(dir);
  }

  /**
   * Whether a cached chain starts below `path`: its walk may stop short of `path` (maxDepth), where no
   * watch of its own sees `path` renamed away and rebuilt (its watches follow the old inodes).
   */
  private startsBelow(path: string): boolean {
    const prefix = path.endsWith(sep) ? path : path + sep;
    return this.chainStarts[lowerBound(this.chainStarts, prefix)]?.startsWith(prefix) === true;
  }

  private markDirty(dir: string): void {
    this.dirty.set(dir, performance.now());
  }

  // ---- watches ----

  private hold(dir: string): void {
    let entry = this.watched.get(dir);
    if (entry === undefined) {
      entry = { dir, refs: 0, handle: undefined, pinned: undefined };
      this.watched.set(dir, entry);
    }
    entry.refs++;
    if (entry.refs === 1) {
      this.records.pin(dir);
      this.unclaimed.delete(dir);
      // Watched before its first read: nothing came before the watch that it could have missed.
      if (entry.handle !== undefined) return;
      this.unwatched.add(dir);
      // A watch costs 1-10 us: thousands at once would stall the loop, so they start in slices (until
      // then the directory counts as unwatched, and is stat'd by every settle that asks for it).
      const held = entry;
      // Behind any read a call waits for: the directory is stat'd by each settle meanwhile, so a late watch costs no freshness.
      if (this.mode === "watch") this.enqueue(() => this.startHeldWatch(dir, held), this.background);
    }
  }

  private letGo(dir: string): void {
    const entry = this.watched.get(dir);
    if (entry === undefined || --entry.refs > 0) return;
    this.records.unpin(dir);
    this.forget(dir, entry);
  }

  /** Nobody holds `dir`: its watch closes, and what freshness kept of it goes (its record stays, evictable). */
  private forget(dir: string, entry: Watched): void {
    this.unwatch(entry);
    this.unwatched.delete(dir);
    this.awaitingRoom.delete(dir);
    this.watched.delete(dir);
    this.dirty.delete(dir);
  }

  /**
   * With inotify, a directory about to be read for the first time is watched first: the read then
   * vouches for everything before it, and no check is owed. Started later, a watch owes one: 7 stats
   * a directory at the next settle, or in the background (0.4-0.5 ms of a step for a 10-level chain
   * read by the step before). The engine holds a new chain's walk before reading it, so its watches
   * start here rather than in the background; a chain read with no holder yet (`explain`, say) is
   * watched too, and a directory nobody holds by the background's next slice is unwatched.
   */
  private watchBeforeRead(dir: string): void {
    if (this.mode !== "watch" || this.inotify === undefined) return;
    const held = this.watched.get(dir);
    // Held already (retained before its read): its watch starts now rather than in the background.
    if (held !== undefined) {
      if (held.refs > 0 && held.handle === undefined && this.startWatch(dir, held)) this.lookForMissing(dir);
      return;
    }
    if (this.activeWatches >= this.options.maxWatchedDirs) return;
    const entry: Watched = { dir, refs: 0, handle: undefined, pinned: undefined };
    this.watched.set(dir, entry);
    if (!this.startWatch(dir, entry)) return void this.watched.delete(dir);
    // No settle checks it once held (found in review): the missing directories a start remembered below it are looked for here.
    this.lookForMissing(dir);
    this.unclaimed.add(dir);
    if (this.unclaimedSweep) return;
    this.unclaimedSweep = true;
    this.enqueue(() => {
      this.unclaimedSweep = false;
      for (const unclaimed of this.unclaimed) {
        const entry = this.watched.get(unclaimed);
        if (entry !== undefined && entry.refs === 0) this.forget(unclaimed, entry);
      }
      this.unclaimed.clear();
    }, this.background);
  }

  /** Missing directories remembered below `dir` (by start resolutions) that exist now, made before a watch could tell: a structure change. */
  private lookForMissing(dir: string): void {
    const kids = this.missingByParent.get(dir);
    // Resolved, not lstat'd: a dangling symlink there is still missing (else every check would find it made), and a file is no directory.
    if (kids !== undefined) for (const kid of [...kids]) if (realAndStat(kid)?.[1] === true) this.structureChanged(kid);
  }

  /** Whether a watch started (the check it owes is the caller's). */
  private startWatch(dir: string, entry: Watched): boolean {
    if (this.disposed || this.watched.get(dir) !== entry) return false;
    if (this.activeWatches >= this.options.maxWatchedDirs) {
      this.awaitingRoom.add(dir);
      return false;
    }
    // fs.watch follows a symlink: only a real directory inside the worktree is watched.
    if (!isInside(dir, this.realRoot) || !isRealDirectory(dir)) return false;
    try {
      entry.handle = this.inotify?.watch(dir, this.onDirEvent) ?? this.fsWatch(dir, entry);
      this.activeWatches++;
      this.unwatched.delete(dir);
      // Changes between the record's read and this watch produced no event: one check is owed.
      this.dirty.set(dir, performance.now());
      return true;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? "";
      if (SYSTEMIC.has(code)) this.fail(`watching ${dir} failed (${code})`);
      return false;
    }
  }

  /**
   * The background's watch start for a held directory still without one: read before it was held
   * and watched (fs.watch, a store that was full, a record kept after its last holder let go). With
   * inotify (nothing dropped, so no quiet window) the check the new watch owes is made here too, so
   * that the next step does not stat the directory. Anything out of the common case (a racy record, missing
   * directories remembered below it, a stat that differs) is left to the next settle, which checks
   * a dirty directory as before.
   */
  private startHeldWatch(dir: string, held: Watched): void {
    if (held.refs === 0 || held.handle !== undefined || this.mode !== "watch" || !this.startWatch(dir, held) || this.inotify === undefined) return;
    const record = this.records.peek(dir);
    if (record === undefined || record.retry || this.missingByParent.has(dir)) return;
    const checkedAt = performance.now();
    if (this.signatureOf(dir) === record.signature) this.verified(record, checkedAt);
  }

  private fsWatch(dir: string, entry: Watched): FSWatcher {
    const handle = watch(dir, { persistent: false }, (_event, filename) => this.onEvent(dir, filename));
    handle.on("error", (error: NodeJS.ErrnoException) => {
      if (SYSTEMIC.has(error.code ?? "")) return this.fail(`watching ${dir} failed (${error.code})`);
      if (entry.handle === handle) this.unwatch(entry);
    });
    return handle;
  }

  private unwatch(entry: Watched): void {
    if (entry.handle === undefined) return;
    this.unverified.delete(entry.dir);
    entry.handle.close();
    entry.handle = undefined;
    this.activeWatches--;
    if (entry.refs > 0) this.unwatched.add(entry.dir);
    this.offerRoom();
  }

  // ---- barrier ----

  /**
   * The inotify barrier: every event queued before it is dispatched when it resolves. In slices, one
   * read of the queue at a time: the 12,000 events of 1,500 directories deleted and made again (a
   * checkout), dispatched in one task with the structure pass they made, blocked the event loop
   * 25-42 ms; what they changed of the structure is worked out in a slice of its own too (see check).
   */
  private async drain(since: number): Promise<void> {
    const at = performance.now();
    this.barrierSeq++;
    // Done when the queue is found empty, or when another settle's drain that began after `since` has passed.
    for (let parts = 1; this.passedAt < since && !this.disposed; parts++) {
      if (this.inotify?.drainPart() !== true) break;
      // A step's own events and the read that finds the queue empty never wait for a slice: asking for
      // one before each read (it opens one and schedules its run) took a step's p99 at 200 directories
      // from 1.8-2.0 to 3.3-4.1 ms. Past them, a checkout's thousands of events wait their turns.
      if (parts >= 2 && !this.hasBudget()) await this.sliced(() => undefined);
    }
    this.passedAt = Math.max(this.passedAt, at);
  }

  /** The kernel's queue overflowed (events were lost): every directory known is checked once. */
  private overflowed(): void {
    const now = performance.now();
    for (const [dir, entry] of this.watched) {
      this.dirty.set(dir, now);
      if (entry.handle !== undefined) this.unverified.add(dir);
    }
    for (const dir of this.records.keys()) this.dirty.set(dir, now);
  }

  /**
   * Resolves once every watch event queued before it has been dispatched: a uniquely named file is
   * written into a private watched directory, and its event awaited (one inotify queue, delivered in
   * order). A barrier not passed yet is shared when its sentinel is written at or after `since` (or
   * is still to be written): it vouches for every change saved before then.
   */
  private barrier(since: number): Promise<void> {
    const latest = this.latest;
    if (latest !== undefined && this.barriers.has(latest.name) && latest.writtenAt >= since) return latest.done;
    if (this.sentinelDir === undefined && !this.openSentinel()) return RESOLVED;
    let resolve!: () => void;
    const done = new Promise<void>((settle) => (resolve = settle));
    const barrier: Barrier = { name: `s${++this.barrierSeq}`, writtenAt: Infinity, done, resolve };
    this.latest = barrier;
    this.barriers.set(barrier.name, barrier);
    queueMicrotask(() => this.writeSentinel(barrier));
    return done;
  }

  private writeSentinel(barrier: Barrier): void {
    if (this.disposed || this.mode === "sync" || this.sentinelDir === undefined) return this.passBarriers();
    barrier.writtenAt = performance.now();
    try {
      writeFileSync(join(this.sentinelDir, barrier.name), "");
    } catch (error) {
      return this.fail(`the freshness barrier could not be written (${String(error)})`);
    }
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      if (this.barriers.has(barrier.name)) this.fail(`a watch event took over ${BARRIER_TIMEOUT_MS} ms to arrive`);
    }, BARRIER_TIMEOUT_MS);
    timer.unref?.();
    this.timers.add(timer);
  }

  private onSentinelEvent(filename: string | Buffer | null): void {
    if (filename === null) return;
    const barrier = this.barriers.get(String(filename));
    if (barrier === undefined) return;
    // It passes one turn later: Bun dispatches the events of one read of its watcher to each watch's
    // callback in turns of their own, not always in the order they happened (an edit's event seen a
    // few ms after the sentinel's, 1 run in 10 of tests/delivery.test.ts's "however recently"; none
    // in 20 with this turn). Until then it is pending, so no settle takes it as passed.
    setImmediate(() => {
      if (!this.barriers.delete(barrier.name)) return; // passed already (a second event, or the watcher closed)
      this.passedAt = Math.max(this.passedAt, barrier.writtenAt);
      barrier.resolve();
    });
    // Removed after the step has gone on: its own event is of no interest.
    if (this.unlinks.push(barrier.name) === 1) setImmediate(() => this.removeSentinels());
  }

  private removeSentinels(): void {
    for (const name of this.unlinks.splice(0)) {
      try {
        if (this.sentinelDir !== undefined) unlinkSync(join(this.sentinelDir, name));
      } catch {
        // already gone with the directory
      }
    }
  }

  private openSentinel(): boolean {
    try {
      this.sentinelDir = mkdtempSync(join(tmpdir(), "opencode-project-context-"));
      this.sentinelWatch = watch(this.sentinelDir, { persistent: false }, (_event, filename) => this.onSentinelEvent(filename));
      this.sentinelWatch.on("error", (error) => this.fail(`the freshness barrier's watch failed (${error.message})`));
      return true;
    } catch (error) {
      this.fail(`the freshness barrier could not be set up (${String(error)})`);
      return false;
    }
  }

  private closeSentinel(): void {
    this.sentinelWatch?.close();
    this.sentinelWatch = undefined;
    if (this.sentinelDir !== undefined) rmSync(this.sentinelDir, { recursive: true, force: true });
    this.sentinelDir = undefined;
    this.unlinks.length = 0;
    this.passBarriers();
  }

  private passBarriers(): void {
    for (const barrier of this.barriers.values()) barrier.resolve();
    this.barriers.clear();
  }

  /** The watcher cannot be trusted any more: say so once, free its resources, stat for good. */
  private fail(reason: string): void {
    if (this.mode === "sync" || this.disposed) return;
    this.mode = "sync";
    this.options.log.log("warn", `file watching stopped: ${reason}; context files are now checked by stat before every step`);
    for (const entry of this.watched.values()) this.unwatch(entry);
    this.dirty.clear();
    this.awaitingRoom.clear();
    this.inotify?.release(this.inotifyUser);
    this.inotify = undefined;
    this.closeSentinel();
  }

  // ---- start resolution ----

  /**
   * Resolves again each symlink below the worktree that cached starts go through, once per link: a
   * retarget (of it, or of a link on its own way) makes no event where the starts' chains are, nor
   * anywhere the store watches, and every session touching a path through it would keep the old
   * target's chain. A link that resolves elsewhere now (or at all, or no more) drops the starts below
   * it (a structure change).
   */
  private recheckLinks(): void {
    for (const [link, entry] of this.links) {
      const real = realPathOrUndefined(link);
      if (real === entry.real) continue;
      // Told once: the starts below it are dropped, and any left keep the new resolution.
      this.links.set(link, { real, starts: entry.starts });
      this.structureChanged(link);
    }
  }

  private linkUsed(link: string): void {
    const entry = this.links.get(link);
    if (entry !== undefined) entry.starts++;
    else this.links.set(link, { real: realPathOrUndefined(link), starts: 1 });
  }

  private linkLetGo(link: string): void {
    const entry = this.links.get(link);
    if (entry !== undefined && --entry.starts <= 0) this.links.delete(link);
  }

  /**
   * The last symlink on `path`'s way down from the worktree (`path` lexically inside it), if any:
   * where it resolves covers every link before it, and every link its own target goes through.
   */
  private lastLink(path: string): string | undefined {
    const base = isInside(path, this.worktree) ? this.worktree : this.realRoot;
    let at = base;
    let last: string | undefined;
    for (const name of relative(base, path).split(sep)) {
      if (name === "") continue;
      at = join(at, name);
      if (isSymlink(at)) last = at;
    }
    return last;
  }

  private computeStart(path: string, isFile: boolean): Start {
    // Out of the worktree index's reach (deeper than MAX_DEPTH levels, or too long to open), where no
    // context file loads, counts as outside: such a path is a trap (a `here -> .` link named hundreds
    // of times, thousands of missing levels), and the climb below stats every level, each stat walking
    // the whole path again (64 such paths in one tool call blocked a step for 1-2 s).
    const base = isInside(path, this.worktree) ? this.worktree : isInside(path, this.realRoot) ? this.realRoot : undefined;
    if (base !== undefined && outOfReach(relativePosix(base, path) + (isFile ? "" : "/"))) return OUTSIDE;
    let probe = path;
    let missing: string | undefined;
    // A dangling symlink on the way: its target made later makes no event where the start is.
    let dangling: string | undefined;
    for (;;) {
      const found = realAndStatOrError(probe);
      // More links on the way than the kernel follows (a loop, or one link named over and over): each
      // level of the climb would follow them again (64 such paths: 65 ms). Outside, as a path out of reach.
      if (found === "ELOOP") return OUTSIDE;
      if (Array.isArray(found)) {
        const [real, isDirectory] = found;
        const dir = isDirectory ? real : dirname(real);
        // Through a symlink below the worktree (not one the worktree's own path may go through): the link is resolved again at each check.
        const link = dangling ?? ((isInside(probe, this.worktree) || isInside(probe, this.realRoot)) && real !== this.withRealRoot(probe) ? this.lastLink(probe) : undefined);
        const start: Start = !isInside(dir, this.realRoot)
          ? OUTSIDE
          : isDirectory
            ? missing !== undefined ? { dir, missing: join(real, basename(missing)) } : { dir }
            : // A file where the path goes on (`lib` of a/lib/x.ts): a checkout may make it a directory, waited for as a missing one.
              probe !== path ? { dir, missing: real } : { dir };
        return link === undefined ? start : { ...start, link };
      }
      const parent = dirname(probe);
      if (parent === probe || !(isInside(parent, this.worktree) || isInside(parent, this.realRoot))) return OUTSIDE;
      // A missing file is not a directory to wait for; a missing directory (or either) is.
      if (!(isFile && probe === path)) missing = probe;
      if (dangling === undefined && isSymlink(probe)) dangling = probe;
      probe = parent;
    }
  }

  /** `path` with the worktree's own path swapped for its real one: what it resolves to when no symlink lies below the worktree. */
  private withRealRoot(path: string): string {
    return this.worktree === this.realRoot || !isInside(path, this.worktree) ? path : join(this.realRoot, relative(this.worktree, path));
  }

  private rememberMissing(dir: string): void {
    const count = this.missing.get(dir) ?? 0;
    this.missing.set(dir, count + 1);
    if (count > 0) return;
    const parent = dirname(dir);
    let kids = this.missingByParent.get(parent);
    if (kids === undefined) {
      kids = new Set();
      this.missingByParent.set(parent, kids);
    }
    kids.add(dir);
  }

  private forgetMissing(dir: string): void {
    const count = this.missing.get(dir);
    if (count === undefined) return;
    if (count > 1) return void this.missing.set(dir, count - 1);
    this.missing.delete(dir);
    const parent = dirname(dir);
    const kids = this.missingByParent.get(parent);
    kids?.delete(dir);
    if (kids?.size === 0) this.missingByParent.delete(parent);
  }

  // ---- slices ----

  /**
   * Runs `work` now if this turn of the event loop has not spent SLICE_MS on reads yet, else in a later
   * slice: thousands of cold directories never stall the loop, and a few cost no extra turn.
   */
  private sliced<T>(work: () => T): Promise<T> {
    if (this.queue.length === 0 && this.hasBudget()) return Promise.resolve(work());
    return new Promise<T>((resolve, reject) =>
      this.enqueue(() => {
        try {
          resolve(work());
        } catch (error) {
          reject(error);
        }
      }),
    );
  }

  private enqueue(work: () => void, queue = this.queue): void {
    queue.push(work);
    if (this.sliceTimer !== undefined) return;
    // The turn's slice, as if a read had opened it: it dates the run of work with no turn since.
    this.openSlice();
    this.sliceTimer = setImmediate(() => this.runSlice());
  }

  /** Whether this turn may still read inline; the first read of a turn opens its slice. */
  private hasBudget(): boolean {
    if (this.sliceTimer === undefined) {
      this.openSlice();
      this.sliceTimer = setImmediate(() => this.runSlice());
    }
    return performance.now() < this.sliceEnd;
  }

  private openSlice(): void {
    this.sliceStart = performance.now();
    this.sliceEnd = this.sliceStart + SLICE_MS;
  }

  /**
   * One slice: at least one queued read, then reads while SLICE_MS lasts; or, when no read is queued,
   * background work the same way. The rest waits for the next turn.
   */
  private runSlice(): void {
    if (this.disposed) return;
    this.openSlice();
    // Whoever waits on a read goes on once this task ends: background work then waits for a slice of its own.
    if (this.queue.length > 0) {
      this.queue.shift()!();
      this.runQueued(false);
    } else {
      this.background.shift()?.();
      this.runQueued();
    }
    this.sliceTimer = this.queue.length > 0 || this.background.length > 0 ? setImmediate(() => this.runSlice()) : undefined;
  }

  /** Queued work while the current slice lasts: the reads in order, then (`background`) the background's. */
  private runQueued(background = true): void {
    while (performance.now() < this.sliceEnd && !this.disposed) {
      const work = this.queue.shift() ?? (background ? this.background.shift() : undefined);
      if (work === undefined) return;
      work();
    }
  }
}

function sizeOf(record: Record_): number {
  let size = 200 + 2 * (record.dir.length + record.signature.length);
  for (const file of [record.file, record.local]) {
    if (file !== null) size += 300 + textBytes(file) + 2 * (file.path.length + file.rel.length);
  }
  for (const skip of record.skipped) size += 100 + 2 * (skip.path.length + skip.reason.length);
  return size;
}

/** How many levels `path` lies below `dir` (a directory at or above it): how far a walk from it goes up to reach `dir`. */
function levelsBelow(path: string, dir: string): number {
  // A root ("/") ends with the separator before its first level.
  let levels = dir.endsWith(sep) && path.length > dir.length ? 1 : 0;
  for (let at = path.indexOf(sep, dir.length); at !== -1; at = path.indexOf(sep, at + 1)) levels++;
  return levels;
}

/** The directory part of a signature: a change there is a structure change, not an edit. */
function identity(signature: string): string {
  const bar = signature.indexOf("|");
  return bar === -1 ? signature : signature.slice(0, bar);
}

/**
 * Whether `path` is a symlink itself (its final component not followed). Only ENOENT is quiet in
 * `throwIfNoEntry`; a name too long, a permission or a file where a directory was expected must not
 * escape a settle either: such a path is no link.
 */
function isSymlink(path: string): boolean {
  try {
    return lstatSync(path, { throwIfNoEntry: false })?.isSymbolicLink() === true;
  } catch {
    return false;
  }
}

/**
 * Where `path` resolves, every link on its way followed. When it does not (dangling, gone, a loop),
 * where its directory resolves, marked as such: a link before it retargeted still changes the answer.
 * Undefined when neither resolves.
 */
function realPathOrUndefined(path: string): string | undefined {
  try {
    return realpathSync.native(path);
  } catch {
    try {
      return `?${realpathSync.native(dirname(path))}`;
    } catch {
      return undefined;
    }
  }
}

function isRealDirectory(path: string): boolean {
  try {
    return lstatSync(path, { throwIfNoEntry: false })?.isDirectory() === true;
  } catch {
    return false;
  }
}

/** `[realPath, isDirectory]`, or undefined when the path does not resolve to anything. */
function realAndStat(path: string): [string, boolean] | undefined {
  const found = realAndStatOrError(path);
  return Array.isArray(found) ? found : undefined;
}

/** realAndStat, with the error's code (ENOENT, ELOOP, ...) when the path does not resolve. */
function realAndStatOrError(path: string): [string, boolean] | string | undefined {
  try {
    const real = realpathSync.native(path);
    const info = statSync(real, { throwIfNoEntry: false });
    return info === undefined ? undefined : [real, info.isDirectory()];
  } catch (error) {
    return (error as NodeJS.ErrnoException).code;
  }
}

/** Whether `path` is one of `paths` or inside one of them (absolute, normalized paths). */
function insideAny(path: string, paths: ReadonlySet<string>): boolean {
  for (let dir = path; ; ) {
    if (paths.has(dir)) return true;
    const parent = dirname(dir);
    if (parent === dir) return false;
    dir = parent;
  }
}
