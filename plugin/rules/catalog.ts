import { readdirSync, watch } from "node:fs";
import { basename, dirname, join } from "node:path";
import type { FileVersion } from "../files/contained.ts";
import { decodeText, RACY_MS, readContained, readContainedHead, type Skip } from "../files/contained.ts";
import { Inotify, type DirWatch, type InotifyUser } from "../files/inotify.ts";
import { needsMatter, parseFrontmatter } from "../files/frontmatter.ts";
import { contextNamesOf } from "../files/names.ts";
import { buildWorktreeIndex, type IgnoreBasisResult, type PathKind, type WorktreeIndex } from "../files/worktree-index.ts";
import type { Logger } from "../log.ts";
import { hiddenByPermission, isInside, printOf, realPathOr, relativePosix, statOrUndefined, statPrint, throughDotGit } from "../paths.ts";
import { nextTurn } from "../turns.ts";
import { readContract, type Contract } from "./contract.ts";
import { AgentRanker, headingsOf, prepareAgentDoc, type AgentDoc, type Ranked } from "./rank.ts";

export interface CatalogOptions {
  /** Real path of the worktree. */
  readonly worktree: string;
  readonly fileNames: readonly string[];
  readonly rules: readonly string[];
  readonly maxEntries: number;
  readonly maxFileBytes: number;
  readonly watch: boolean;
  readonly log: Logger;
  /**
   * Loads what frontmatter of another shape than simpleYaml's needs (gray-matter), in tasks of their
   * own: called when the build meets the first file that needs it, before that file is parsed, so that
   * no read loads a library in one go. A worktree without such a file never loads it.
   */
  readonly loadLibraries?: () => Promise<void>;
  /** git's settings of ignoring, asked for already (see readIgnoreBasis). */
  readonly basis?: Promise<IgnoreBasisResult>;
  /** Before each slice of reads: a promise to wait for while steps are reading (they come first), else undefined. */
  readonly giveWay?: () => Promise<void> | undefined;
}

/** A context file of the worktree that loads by something else than a touch. */
export interface Entry {
  readonly file: FileVersion;
  readonly contract: Contract;
  /** Found by the `rules` globs (not a context file name): its `paths` are worktree-relative. */
  readonly rule: boolean;
  /** What stat said of the file when it was read. */
  readonly print: string;
}

/** What `read` gives, while the catalog is built, for a file it reads once the libraries are loaded. */
const LATER = Symbol("later");
/** What `read` gives when the read failed in a way that may pass by itself (see passing). */
const RETRY = Symbol("retry");
/** What a racy entry's print says: no stat ever prints this, so the next refresh reads the file again. */
const RACY_PRINT = "racy";
/** Bytes of a context file read to learn its include mode (frontmatter is a file's first lines). */
const HEAD_BYTES = 4096;
/** Start-up reads run in slices this long at most, as the store's do. */
const SLICE_MS = 4;
/** Watched directories that went, kept to be watched again when they are back: the latest this many. */
const MAX_GONE = 256;
/** A slice waits this long at most for the steps reading: sessions stepping without a pause must not hold the catalog back for good. */
const MAX_GIVE_WAY_MS = 100;

/**
 * The worktree's context files that load without a touch: `always` files (and rule files with no
 * `include`: like the rule folders of peers, they always apply, or apply where their `paths` match),
 * `agent` files (offered per message by rank), `manual` files (listed, loaded when pinned). Built
 * from the worktree index (git ls-files, or a walk honouring .gitignore); a file is read whole only
 * when the frontmatter at its start may give it such a mode. Kept fresh by a watch of each directory that holds one of these
 * files or may receive a rule file: a change there is read again before the next step asks. With
 * Linux's inotify (the store's instance, read synchronously: an exact barrier) a refresh reads what
 * events named and stats only the entries events may not tell of; with fs.watch (elsewhere), whose
 * events come late, it stats every entry.
 */
export class Catalog {
  /** Grows with every change of what the catalog holds. */
  version = 0;
  private entries = new Map<string, Entry>();
  private ranker: AgentRanker | undefined;
  /** Watched directories; with inotify, each with the identity (dev:ino) it had when its watch began. */
  private readonly watchers = new Map<string, { readonly watch: DirWatch; readonly id: string }>();
  /** Linux's event queue, shared (inotify.ts); undefined: fs.watch, and every entry stat'd at each refresh. */
  private readonly inotify: Inotify | undefined;
  private readonly inotifyUser: InotifyUser = {
    drained: () => {},
    overflowed: () => {
      this.eventsLost = true;
      this.overflowed = true;
    },
  };
  /** Paths inotify events named since the last refresh. */
  private readonly pending = new Set<string>();
  /** Paths whose last read failed in a way that may pass by itself: read again at the next refresh, as if events named them. */
  private readonly retrying = new Set<string>();
  /**
   * Entries an event may not tell of, stat'd at each refresh (inotify): each one read since the last
   * refresh (its directory's watch may have begun after its read), and those read within a timestamp
   * tick of a change (racy), in a directory not watched, that are a symlink, or with another hard link
   * (an edit through another name is an event elsewhere).
   */
  private readonly unsure = new Set<string>();
  /**
   * Watched directories with an ancestor (up to the worktree) that could not be watched: the only ones
   * whose identity a refresh checks (see checkWatchedDirs).
   */
  private readonly unguarded = new Set<string>();
  /** The directories that held rule files when the catalog was built (watched, or listed at each refresh with no watches). */
  private readonly ruleDirs = new Set<string>();
  /** With no watches: what stat said of each file of a rule directory that is no entry, when it was last listed. */
  private readonly listed = new Map<string, string>();
  /**
   * Entries that went while their path stayed a symlink (its target deleted, moved, or now out of the
   * worktree), with what stat said through the link then: the target's return is an event where the
   * target is, not where the link is, so each is stat'd at every refresh and read again when that
   * changes. Never more than the entries that were links.
   */
  private readonly dangling = new Map<string, string>();
  /**
   * With no watches (option watch false): files that were entries and are still there (edited out of
   * their include mode, made unreadable), with what stat said before their last read; and in either
   * mode, entries a directory on the way hides for now (closed to this user: "-"). Nothing lists
   * them (only rule directories are listed), so each is stat'd at every refresh and read again when
   * that changes: an edit back into a mode is in the next step, as an entry's edit is.
   */
  private readonly former = new Map<string, string>();
  /** Watched directories that went or are other ones now: watched again when they are there. */
  private readonly gone = new Set<string>();
  /** The queue overflowed, or a watched directory went or is another one now: every entry is stat'd at the next refresh. */
  private eventsLost = false;
  /**
   * The queue overflowed: a file made meanwhile in a watched directory (a new rule file, an always
   * file's variant) told nothing, and no entry's stat finds it. Every watched directory is listed at
   * the next refresh, as one back from gone is.
   */
  private overflowed = false;
  /** Stats of entries made by refreshes, and of watched directories' identity (for tests: what a refresh costs). */
  refreshStats = 0;
  dirChecks = 0;
  private readonly names: ReadonlySet<string>;
  private disposed = false;
  /** When the last refresh began: it has every change saved before then. */
  private refreshedAt = -Infinity;
  /** The refresh running, if one is. */
  private refreshing: Promise<void> | undefined;
  /** While the catalog is built and until a file needs them: what loads the libraries (options.loadLibraries). */
  private loadLibraries: (() => Promise<void>) | undefined;

  private constructor(
    private readonly options: CatalogOptions,
    readonly index: WorktreeIndex | undefined,
  ) {
    const names = contextNamesOf(options.fileNames);
    this.names = new Set([...names.base, ...names.override, ...names.local]);
    this.loadLibraries = options.loadLibraries;
    this.inotify = options.watch ? Inotify.acquire(this.inotifyUser) : undefined;
  }

  static async build(options: CatalogOptions): Promise<Catalog> {
    let index: WorktreeIndex | undefined;
    try {
      index = await buildWorktreeIndex({
        worktree: options.worktree,
        fileNames: options.fileNames,
        rules: options.rules,
        maxEntries: options.maxEntries,
        log: (level, message) => options.log.once(`index:${message}`, level, message),
        ...(options.basis === undefined ? {} : { basis: options.basis }),
      });
    } catch (error) {
      options.log.once("index:failed", "warn", `worktree index: could not be built (${String(error)}); always, agent and manual files are not found`);
    }
    const catalog = new Catalog(options, index);
    const turn = () => catalog.turn();
    await turn();
    // Reads run in slices of SLICE_MS at most: building never blocks the event loop for long, nor holds up a step.
    let sliceEnd = performance.now() + SLICE_MS;
    for (const rel of index?.files ?? []) {
      if (performance.now() > sliceEnd) {
        await turn();
        sliceEnd = performance.now() + SLICE_MS;
      }
      // The index lists only files that may load: no need to ask it again for each.
      const path = join(options.worktree, rel);
      if (catalog.consider(path, true, catalog.loadLibraries !== undefined)) continue;
      // The first file whose frontmatter needs gray-matter: it loads now, then the file is read.
      const load = catalog.loadLibraries;
      catalog.loadLibraries = undefined;
      await load?.();
      await turn();
      sliceEnd = performance.now() + SLICE_MS;
      catalog.consider(path, true);
    }
    catalog.loadLibraries = undefined;
    catalog.watchAll(index?.files ?? []);
    return catalog;
  }

  /**
   * Indexes the agent files for ranking, in slices, once the catalog is in use: made by the first
   * message ranked, they were one task of 155 ms at 200 agent files of 3 KB (a worst-case hunt). A
   * message ranked meanwhile indexes those not done yet itself.
   */
  async prepareRanking(): Promise<void> {
    let sliceEnd = performance.now() + SLICE_MS;
    for (const entry of this.entries.values()) {
      if (this.disposed) return;
      if (entry.contract.include !== "agent") continue;
      if (performance.now() > sliceEnd) {
        await this.turn();
        sliceEnd = performance.now() + SLICE_MS;
      }
      prepareAgentDoc(agentDoc(entry));
    }
  }

  /**
   * A turn of the event loop before the next slice, after the steps reading then (giveWay, for at most
   * MAX_GIVE_WAY_MS): woken as a step ends, a slice would otherwise run in that step's task and lengthen it.
   */
  private async turn(): Promise<void> {
    const latest = performance.now() + MAX_GIVE_WAY_MS;
    for (;;) {
      await nextTurn();
      const steps = this.options.giveWay?.();
      if (steps === undefined || performance.now() >= latest) return;
      await Promise.race([steps, new Promise((resolve) => setTimeout(resolve, latest - performance.now()))]);
    }
  }

  get all(): IterableIterator<Entry> {
    return this.entries.values();
  }

  get(path: string): Entry | undefined {
    return this.entries.get(path);
  }

  /** `agent` files scoring above the threshold for `message`, best first. */
  rank(message: string, threshold: number, top: number): (Ranked & { readonly entry: Entry })[] {
    if (this.ranker === undefined) {
      const docs: AgentDoc[] = [];
      for (const entry of this.entries.values()) {
        if (entry.contract.include !== "agent") continue;
        docs.push(agentDoc(entry));
      }
      this.ranker = new AgentRanker(docs);
    }
    return this.ranker.rank(message, { threshold, top }).map((ranked) => ({ ...ranked, entry: this.entries.get(ranked.key)! }));
  }

  /**
   * A context file name or rule file at `path` was created, changed or deleted (a store or catalog
   * watch saw it): read at the next refresh, once however many events named it. Read at once, a
   * checkout of 1,500 AGENTS.md blocked the event loop 130-340 ms inside the watcher's drain.
   */
  heard(path: string): void {
    if (!this.disposed) this.pending.add(path);
  }

  private changed(path: string): void {
    const stat = statOrUndefined(path, false);
    this.list(path, stat === undefined ? "gone" : stat.isDirectory() ? "directory" : "file");
    // Gone: its entry goes with no read (an `rm -rf` of 3,000 rule files made 3,000 contained reads fail).
    if (stat === undefined) this.install(path, undefined);
    else this.consider(path);
  }

  /** The index hears what is at `path` now: a deleted candidate leaves it (else it stays listed, and counts against maxEntries). */
  private list(path: string, now: PathKind): void {
    const rel = relativePosix(this.options.worktree, path);
    if (this.index !== undefined && !rel.startsWith("..")) this.index.update(rel, now);
  }

  /**
   * Entries whose file stat says changed since it was read are read again: run before each step's
   * work, so an edit saved before `since` is in it whatever the watches did. A refresh that ran
   * since then vouches for it already (the parallel calls of a step stat the entries once).
   */
  async refresh(since = Infinity): Promise<void> {
    // The parallel calls of a step share a refresh; one that began before `since` does not vouch for it.
    while (this.refreshedAt < since && this.refreshing !== undefined) await this.refreshing;
    if (this.refreshedAt >= since || this.disposed) return;
    const at = performance.now();
    this.refreshing = this.refreshNow().finally(() => {
      this.refreshedAt = at;
      this.refreshing = undefined;
    });
    await this.refreshing;
  }

  /** What a refresh reads and stats, in slices of SLICE_MS: a checkout names thousands of files. */
  private async refreshNow(): Promise<void> {
    let sliceEnd = performance.now() + SLICE_MS;
    const sliced = async (work: () => void) => {
      if (performance.now() > sliceEnd) {
        await nextTurn();
        sliceEnd = performance.now() + SLICE_MS;
      }
      if (!this.disposed) work();
    };
    let stale: string[];
    let relist: string[] = [];
    if (this.inotify === undefined) stale = [...this.entries.keys()];
    else {
      // One read of the queue at a time, in slices: it dispatches to the store's watches too, and a
      // checkout's events (12,000 for 1,500 directories deleted and made again) in one task blocked
      // the event loop 25-42 ms.
      for (let more = true; more && !this.disposed; ) await sliced(() => (more = this.inotify?.drainPart() === true));
      this.checkWatchedDirs();
      if (this.eventsLost) for (const path of this.entries.keys()) this.unsure.add(path);
      this.eventsLost = false;
      stale = [...this.unsure];
      this.unsure.clear();
      if (this.overflowed) relist = [...this.watchers.keys()];
      this.overflowed = false;
    }
    // With no watches (option watch false), a rule file new in a rule directory is found by listing it
    // (one that is no entry is read again only when stat says it changed).
    if (!this.options.watch) for (const dir of this.ruleDirs) this.listRuleDir(dir);
    for (const [path, print] of this.former) {
      this.refreshStats++;
      const now = statPrint(path);
      if (now === "-") {
        if (!hiddenByPermission(path)) this.former.delete(path);
      } else if (now !== print) this.pending.add(path);
    }
    for (const [path, print] of this.dangling) {
      this.refreshStats++;
      // No link there any more: a file put at its path is an event of its own directory's watch (or a listing).
      if (statOrUndefined(path, false)?.isSymbolicLink() !== true) {
        this.dangling.delete(path);
        continue;
      }
      const now = statPrint(path);
      if (now === print) continue;
      // Read once for this change (a target back with no mode to load by stays a link to look at).
      this.dangling.set(path, now);
      this.pending.add(path);
    }
    // After an overflow, each watched directory's names, as if events named them (in slices: a checkout
    // that overflows the queue may find the catalog watching thousands of directories).
    for (const dir of relist) await sliced(() => this.relistDir(dir));
    const named = [...this.pending, ...this.retrying];
    this.pending.clear();
    this.retrying.clear();
    for (const path of named) await sliced(() => this.changed(path));
    for (const path of stale) await sliced(() => this.recheck(path));
  }

  /** A watched directory's names that are no entry (the entries are stat'd as unsure), as if events named them. */
  private relistDir(dir: string): void {
    if (!this.watchers.has(dir)) return;
    for (const name of readdirOrEmpty(dir)) if (!this.entries.has(join(dir, name))) this.onDirEvent(dir, name, false);
  }

  private listRuleDir(dir: string): void {
    // Never a directory a symlink on the way leads to (outside the worktree, maybe), as for watches.
    if (realPathOr(dir) !== dir) return;
    const seen = new Map<string, string>();
    for (const name of readdirOrEmpty(dir)) {
      const path = join(dir, name);
      if (this.entries.has(path)) continue;
      const print = statPrint(path);
      seen.set(path, print);
      if (this.listed.get(path) !== print) this.onDirEvent(dir, name, false);
    }
    for (const path of this.listed.keys()) if (dirname(path) === dir && !seen.has(path)) this.listed.delete(path);
    for (const [path, print] of seen) this.listed.set(path, print);
  }

  /** An entry read again when stat says it changed since; with inotify, kept among the unsure while events may not tell of it. */
  private recheck(path: string): void {
    const entry = this.entries.get(path);
    if (entry === undefined) return;
    this.refreshStats++;
    const info = statOrUndefined(path);
    if (info === undefined) {
      // Moved away or deleted with a directory above it (whose watch went with it: no event names
      // it): it leaves the index too, unless it is a symlink whose target went (it is still there),
      // or a directory on the way was closed to this user: then it is among the former, to be read
      // again once stat finds it (with no watches, nothing else would look there).
      const hidden = hiddenByPermission(path);
      if (!hidden && statOrUndefined(path, false) === undefined) this.list(path, "gone");
      this.install(path, undefined);
      if (hidden) this.former.set(path, "-");
    } else if (printOf(info) !== entry.print) this.consider(path);
    else if (this.inotify !== undefined && !(info.nlink === 1 && this.eventsTell(path, entry))) this.unsure.add(path);
  }

  private eventsTell(path: string, entry: Entry): boolean {
    return entry.print !== RACY_PRINT && entry.file.path === path && this.watchers.has(dirname(path));
  }

  /**
   * A watch follows its directory's inode: a directory moved away (an ancestor renamed, say) or
   * replaced by another at its path tells nothing at that path. So every ancestor of a watched
   * directory, up to the worktree, is watched too (see watchDir): a rename or deletion of any of them
   * is an event of its own watch (`self`), after which every watch's identity is checked, and every
   * entry stat'd, at the next refresh. A steady refresh checks only the directories whose ancestors
   * could not all be watched (one stat each): with 2,000 directories holding entries, the identity
   * stat of each at every refresh cost 2-3 ms a step.
   */
  private checkWatchedDirs(): void {
    // After lost events, every watch, asked of the kernel too: a directory made again on its old inode
    // number has the same identity, and lost its watch unseen.
    const lost = this.eventsLost;
    for (const dir of lost ? [...this.watchers.keys()] : [...this.unguarded]) {
      const watched = this.watchers.get(dir);
      if (watched === undefined) {
        this.unguarded.delete(dir);
        continue;
      }
      if (this.dirId(dir) === watched.id && !(lost && this.inotify?.alive(watched.watch) === false)) continue;
      this.unwatch(dir);
      this.eventsLost = true;
      this.goneAway(dir);
    }
    // A directory gone is watched again once it is back (moved back, made again).
    for (const dir of [...this.gone]) {
      this.watchDir(dir);
      if (!this.watchers.has(dir)) continue;
      this.gone.delete(dir);
      // Files made there before the new watch began: read as if events named them.
      for (const name of readdirOrEmpty(dir)) this.onDirEvent(dir, name, false);
    }
  }

  private unwatch(dir: string): void {
    this.watchers.get(dir)?.watch.close();
    this.watchers.delete(dir);
    this.unguarded.delete(dir);
  }

  /** Directories watched only as an ancestor of another (see watchDir): never kept among the gone. */
  private readonly guardsOnly = new Set<string>();

  /**
   * Kept to be watched again when it is back; the latest MAX_GONE only (each costs a stat a refresh,
   * and most never come back). Not an ancestor watched only as a guard: it comes back with a
   * directory below it (a deleted tree takes its deepest directories first, and its ancestors pushed
   * them out of the list).
   */
  private goneAway(dir: string): void {
    // A guard replaced by another directory at its path (a checkout, lost events) is watched again at
    // once: a directory below it that kept its identity would never bring it back.
    if (this.guardsOnly.delete(dir)) return this.watchDir(dir, true);
    this.gone.delete(dir);
    this.gone.add(dir);
    if (this.gone.size > MAX_GONE) this.gone.delete(this.gone.values().next().value!);
  }

  private dirId(dir: string): string {
    this.dirChecks++;
    const info = statOrUndefined(dir);
    return info?.isDirectory() === true ? `${info.dev}:${info.ino}` : "-";
  }

  /**
   * Every inotify watch's listener: a path that may be an entry is read again at the next refresh
   * (events on other files, a build's output, say, cost nothing more).
   */
  private readonly onDirEvent = (dir: string, name: string, self: boolean): void => {
    // The directory itself went (deleted, moved): every entry is stat'd, and the directory watched
    // again once it is back (the identity check alone would miss one made again on the same inode).
    if (self) {
      this.unwatch(dir);
      this.goneAway(dir);
      this.eventsLost = true;
      return;
    }
    const path = join(dir, name);
    if (this.names.has(name) || this.entries.has(path) || this.index?.mayLoad(relativePosix(this.options.worktree, path)) === true) this.pending.add(path);
  };

  dispose(): void {
    this.disposed = true;
    for (const { watch } of this.watchers.values()) watch.close();
    this.watchers.clear();
    this.inotify?.release(this.inotifyUser);
  }

  /**
   * Reads `path` again if it may be an entry, and keeps it, changes it or lets it go; false (and
   * nothing changed) when `deferring` and its frontmatter needs a library not loaded yet.
   */
  private consider(path: string, listed = false, deferring = false): boolean {
    // Without watches, stat before the read, as read() does: an entry that is none after it is kept among the former.
    const startedAt = Date.now();
    const info = this.options.watch ? undefined : statOrUndefined(path);
    const entry = this.read(path, listed, deferring);
    if (entry === LATER) return false;
    if (entry === RETRY) {
      // Keep the last good (an entry stays as it was) and read again at the next refresh: nothing
      // else would, since a failure that passes with no change to the file makes no event.
      this.retrying.add(path);
      return true;
    }
    const wasEntry = this.entries.has(path) || this.former.has(path);
    this.install(path, entry);
    if (info !== undefined && entry === undefined && wasEntry) this.former.set(path, startedAt - info.ctimeMs < RACY_MS ? RACY_PRINT : printOf(info));
    else this.former.delete(path);
    return true;
  }

  /** `path`'s entry is now `entry` (undefined: it is none, or not there). */
  private install(path: string, entry: Entry | undefined): void {
    const before = this.entries.get(path);
    // Same bytes, same entry: an event on an unchanged file re-rules no session. What stat says now is
    // kept, or a touched-only change (mtime) would have refresh() read the file again at every step.
    if (entry?.file.sha256 === before?.file.sha256 && entry?.file.path === before?.file.path) {
      if (entry !== undefined && before !== undefined && entry.print !== before.print) this.entries.set(path, { ...before, print: entry.print });
      if (entry !== undefined && this.inotify !== undefined) this.unsure.add(path);
      return;
    }
    if (entry === undefined) {
      this.entries.delete(path);
      if (before !== undefined && statOrUndefined(path, false)?.isSymbolicLink() === true) this.dangling.set(path, statPrint(path));
    } else {
      this.entries.set(path, entry);
      this.dangling.delete(path);
    }
    if (entry !== undefined && this.inotify !== undefined) this.unsure.add(path);
    this.ranker = undefined;
    this.version++;
  }

  private read(path: string, listed: boolean, deferring: boolean): Entry | undefined | typeof LATER | typeof RETRY {
    if (!listed && this.index !== undefined && !this.index.mayLoad(relativePosix(this.options.worktree, path))) return undefined;
    // Stat before the read, as the store signs a directory before reading it: an edit in between shows at the next refresh.
    const startedAt = Date.now();
    const print = statPrint(path);
    const rule = !this.names.has(basename(path));
    // A rule file is read whole anyway: its head only to learn whether the libraries must load first.
    const head = rule && !deferring ? undefined : this.frontmatterHead(path);
    if (head === RETRY) return RETRY;
    if (deferring && head !== undefined && needsMatter(head.text, head.truncated)) return LATER;
    if (!rule && (head === undefined || !textMayLoad(head.text, head.truncated))) return undefined;
    const outcome = readContained(path, dirname(path), this.options.worktree, this.options.maxFileBytes);
    if (outcome.kind === "skip" && this.passing(outcome.skip)) return RETRY;
    if (outcome.kind !== "file") return undefined;
    if (outcome.version.path !== path && this.leadsToHeld(path, outcome.version)) return undefined;
    let contract = readContract(outcome.version.frontmatter);
    // A rule file that does not say how it loads applies always (where its paths match, if it has some).
    if (rule && !contract.modeGiven) contract = { ...contract, include: "always" };
    if (contract.include === "touched") return undefined;
    if (this.options.watch) this.watchDir(dirname(path));
    // A file changed within RACY_MS of the read may change again within the same timestamp: read again at the next refresh.
    return { file: outcome.version, contract, rule, print: startedAt - outcome.changedMs < RACY_MS ? RACY_PRINT : print };
  }

  /**
   * Whether a listed file that is a link (.opencode/rules/r.md -> ../../.env) leads to a file git
   * ignores, or into .git: the index judged the link's path, not its target, and a committed link
   * must not hand over a developer's ignored secrets. A context file name led to an ignored file of a
   * context name loads, as the store's do (a personal CLAUDE.md); without the index, no link loads.
   */
  private leadsToHeld(path: string, version: FileVersion): boolean {
    const rel = relativePosix(this.options.worktree, version.path);
    const held = throughDotGit(rel) || this.index === undefined || (this.index.isIgnored(rel) && !(this.names.has(basename(path)) && this.names.has(basename(version.path))));
    if (held) this.options.log.once(`held:${path}:${rel}`, "warn", `skipped ${path}: it leads to ${rel}, which git ignores (or which is git's own); a file git ignores loads only by a context file name`);
    return held;
  }

  /**
   * The head of a file that starts with frontmatter, from one read: only such a context file can load by
   * more than a touch (textMayLoad), and most files do not start so, so most cost this read alone: no
   * hashing, and no decoding without frontmatter. The read is contained as any: a symlink leading out,
   * a FIFO or a directory is refused.
   */
  private frontmatterHead(path: string): { text: string; truncated: boolean } | undefined | typeof RETRY {
    const head = readContainedHead(path, this.options.worktree, HEAD_BYTES);
    if (head.kind === "skip" && this.passing(head.skip)) return RETRY;
    if (head.kind !== "head" || !startsWithDashes(head.bytes)) return undefined;
    // A head that is binary or not UTF-8 makes no context file.
    const text = decodeText(head.bytes, head.truncated);
    return text.kind === "text" ? { text: text.text, truncated: head.truncated } : undefined;
  }

  /** A read failure that may pass with no change to the file (too many open files, an I/O error): logged once, and the read tried again. */
  private passing(skip: Skip): boolean {
    if (skip.unannounced !== true) return false;
    this.options.log.once(`catalog-retry:${skip.path}:${skip.reason}`, "warn", `could not read ${skip.path}: ${skip.reason}; what it said before is kept, and it is read again at the next step`);
    return true;
  }

  private watchAll(rels: readonly string[]): void {
    // The directories that hold rule files may receive new ones: watched even when none is an entry yet.
    for (const rel of rels) if (!this.names.has(basename(rel))) this.ruleDirs.add(dirname(join(this.options.worktree, rel)));
    if (this.options.watch) for (const dir of this.ruleDirs) this.watchDir(dir);
  }

  private watchDir(dir: string, asGuard = false): void {
    if (this.watchers.has(dir)) {
      if (!asGuard) this.guardsOnly.delete(dir);
      return;
    }
    if (this.disposed) return;
    if (this.inotify !== undefined) {
      // Its identity before the watch: a directory replaced in between is found changed at the next refresh.
      const id = this.dirId(dir);
      // Never a directory a symlink on the way leads to (outside the worktree, maybe): no watch there, and no listing.
      if (id === "-" || realPathOr(dir) !== dir) return;
      try {
        this.watchers.set(dir, { watch: this.inotify.watch(dir, this.onDirEvent), id });
      } catch {
        // Not watched (out of watches, say): its entries stay unsure, stat'd at every refresh.
        return;
      }
      if (asGuard) this.guardsOnly.add(dir);
      // Its ancestors too, each once (checkWatchedDirs): a real directory's ancestors are real.
      const parent = dirname(dir);
      if (dir === this.options.worktree || !isInside(parent, this.options.worktree)) return;
      this.watchDir(parent, true);
      if (!this.watchers.has(parent) || this.unguarded.has(parent)) this.unguarded.add(dir);
      return;
    }
    try {
      const watcher = watch(dir, { persistent: false }, (_event, name) => {
        if (name !== null) this.heard(join(dir, String(name)));
      });
      watcher.on("error", () => {
        watcher.close();
        this.watchers.delete(dir);
      });
      this.watchers.set(dir, { watch: watcher, id: "" });
    } catch {
      // A directory that cannot be watched is read again when the store sees a change there.
    }
  }
}

const DASH = 0x2d;

/**
 * What can make frontmatter name a mode: the keys readContract takes it from (`include`, and Cursor's
 * `alwaysApply`; YAML and JSON keys are case-sensitive), and what can spell a key without writing it:
 * a backslash escape (`"incl\x75de"`, an escaped line break inside a key) or a YAML tag
 * (`? !!binary aW5jbHVkZQ==` is the key "include").
 */
const MAY_NAME_MODE = /include|alwaysApply|[\\!]/;

/**
 * Whether a file whose first bytes are `text` (all of it, or a head cut short: `truncated`) may load by
 * more than a touch. Frontmatter is parsed only when it may name a mode: its block can only come from
 * the text before the first line starting with `---` after the opening one (parseFrontmatter takes a
 * block with such a line inside for content). When the head holds that line, a read of the whole file
 * (or of its first maxFileBytes) finds the same text there, or no closed block at all: if that text
 * names no mode, the file is `touched` whatever the rest holds. The gray-matter parse this spares is
 * most of the cost of a file with frontmatter; tests/rules/catalog.test.ts holds the answer to that
 * of a parse of every head.
 */
export function textMayLoad(text: string, truncated: boolean): boolean {
  const blockEnd = text.indexOf("\n---");
  if (blockEnd !== -1 && !MAY_NAME_MODE.test(text.slice(0, blockEnd))) return false;
  const { frontmatter } = parseFrontmatter(text);
  // The head tells when it holds the whole file, or a whole frontmatter block; else the file is read whole.
  const told = !truncated || Object.keys(frontmatter).length > 0;
  return !told || readContract(frontmatter).include !== "touched";
}

/**
 * Frontmatter opens with `---` as a file's first bytes, after a UTF-8 byte order mark if any: decodeText
 * drops the mark, and so does the read that parses the whole file.
 */
function startsWithDashes(bytes: Uint8Array): boolean {
  const at = bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf ? 3 : 0;
  return bytes[at] === DASH && bytes[at + 1] === DASH && bytes[at + 2] === DASH;
}

/** One ranker doc per file version: the ranker indexes each doc object once. */
const agentDocs = new WeakMap<FileVersion, AgentDoc>();

function agentDoc(entry: Entry): AgentDoc {
  const { file } = entry;
  let doc = agentDocs.get(file);
  if (doc === undefined) {
    // The body is read where the ranker indexes it (once): the doc does not keep a decoded copy (version.ts).
    doc = {
      key: file.path,
      description: entry.contract.description,
      headings: headingsOf(file.body),
      get body() {
        return file.body;
      },
    };
    agentDocs.set(file, doc);
  }
  return doc;
}

/** The names in `dir`, none when it cannot be listed. */
function readdirOrEmpty(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}
