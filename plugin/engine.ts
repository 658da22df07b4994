import type { PluginInput } from "@opencode-ai/plugin";
import { realpath, stat } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { ContextCache, type CachedFile } from "./cache.ts";
import { condense } from "./condense.ts";
import { discover, walkUp } from "./discover.ts";
import type { Logger } from "./log.ts";
import type { ResolvedOptions } from "./options.ts";
import { isInside, touchedDirectories } from "./paths.ts";
import { render, type Measure } from "./render.ts";
import { Sessions, type Memo, type SessionState } from "./sessions.ts";
import { loadTokenizer, measurer } from "./tokens.ts";
import { DirectoryWatcher } from "./watch.ts";

export interface EngineSettings {
  /** Where relative tool paths resolve and where every session's own chain starts. */
  directory: string;
  /** The walk's upper bound. */
  worktree: string;
  options: ResolvedOptions;
  log: Logger;
  client: PluginInput["client"] | undefined;
}

/** What a directory a session touched stands for on disk. */
interface Start {
  /** Real directory the walk starts from (the nearest one that exists). */
  dir: string;
  /** The first directory below it that does not exist yet, if the touched path is not there. */
  missing?: string;
}

const HISTORY_TIMEOUT_MS = 3000;
const HOST_INSTRUCTIONS = "Instructions from: ";

/**
 * The plugin's shared state and the work behind every hook: touched paths per session, one
 * watched cache of context files, and the memoized block each session gets.
 */
export class Engine {
  readonly cache: ContextCache;
  readonly watcher: DirectoryWatcher | undefined;
  readonly sessions: Sessions;
  /** Validate by stat before every step: no watcher was asked for, or it failed. */
  private statMode: boolean;
  private disposed = false;
  private readonly starts = new Map<string, Start>();
  /**
   * What is good only while the cache's generation holds (any change bumps it): where paths that
   * did not exist lead, and the chain of files from each start directory. A session that touches a
   * new directory then costs one new walk, not a walk per directory it ever touched.
   */
  private readonly missingStarts = new Map<string, Start>();
  private readonly chains = new Map<string, CachedFile[] | Promise<CachedFile[]>>();
  /** The directories a walk from each start directory visits (pure, so kept for good). */
  private readonly walks = new Map<string, readonly string[]>();
  private generationSeen = -1;
  private readonly realPaths = new Map<string, Promise<string>>();
  private measuring: Promise<Measure<CachedFile>> | undefined;

  private constructor(
    private readonly settings: EngineSettings,
    /** The worktree with symlinks resolved: every containment decision is made against it. */
    readonly realRoot: string,
  ) {
    const { options, log } = settings;
    this.sessions = new Sessions(options.maxTouchedDirs);
    this.statMode = !options.watch;
    this.watcher = options.watch
      ? new DirectoryWatcher({
          fileNames: options.fileNames,
          capacity: options.maxWatchedDirs,
          onChange: (dir) => void this.cache.revalidate([dir]),
          onStructure: (dir) => this.cache.invalidate(dir),
          onFailure: (error) => {
            this.statMode = true;
            log.log("warn", `file watching stopped (${error.message}); context files are now checked by stat before every step`);
          },
        })
      : undefined;
    this.cache = new ContextCache({
      realRoot,
      fileNames: options.fileNames,
      maxFileBytes: options.maxFileBytes,
      log,
      onLookup: (dir, exists) => (exists ? this.watcher?.watch(dir) : this.watcher?.expect(dir)),
    });
  }

  static async create(settings: EngineSettings): Promise<Engine> {
    const realRoot = await realpath(settings.worktree).catch(() => settings.worktree);
    return new Engine(settings, realRoot);
  }

  /** Records what a tool call touches. Synchronous and free of I/O: it runs before every tool. */
  touch(sessionID: string, tool: unknown, args: unknown): void {
    if (this.disposed) return;
    const dirs = touchedDirectories(tool, args, this.settings.directory, this.settings.worktree);
    if (dirs.length > 0) this.sessions.get(sessionID).touch(dirs);
  }

  /** The block for the session's next step, given the system prompt the host built for it. */
  async blockFor(sessionID: string, system: readonly string[]): Promise<Memo | undefined> {
    if (this.disposed) return undefined;
    const session = this.sessions.get(sessionID);
    const hostKey = this.hostKeyOf(system);
    if (hostKey !== session.hostKey) {
      const hostPaths = await this.hostPaths(hostKey);
      session.hostKey = hostKey;
      session.hostPaths = hostPaths;
    }
    return this.memoFor(sessionID, session);
  }

  /** The closest-first copy for the compaction summarizer. */
  async compactionCopy(sessionID: string): Promise<string> {
    if (this.disposed) return "";
    const session = this.sessions.get(sessionID);
    const memo = await this.memoFor(sessionID, session);
    const order = new Map(memo.files.map((file, index) => [file.path, index]));
    const closestFirst = [...memo.files].sort(
      (a, b) => depth(b.dir) - depth(a.dir) || order.get(b.path)! - order.get(a.path)!,
    );
    return condense(closestFirst, this.settings.options.compactionTokens, await this.measure());
  }

  /**
   * After a tool ran, or a user message arrived, a stat check of everything the session's block
   * depends on starts, and the next step waits for it. Every step follows one of the two, so a file
   * the agent wrote, a bash command changed, or the user edited between messages shows in the very
   * next step, watched or not; the watcher only makes the change known sooner.
   */
  checkBeforeNextStep(sessionID: string): void {
    if (this.disposed) return;
    const session = this.sessions.get(sessionID);
    if (session.memo === undefined) return;
    // Tool calls of one step run in parallel: one check in flight, and one more after it if asked
    // meanwhile, rather than a full check per call.
    if (session.validating !== undefined) {
      session.recheck = true;
      return;
    }
    session.validating = (async () => {
      try {
        do {
          session.recheck = false;
          if (session.memo !== undefined) await this.validate(session.memo);
        } while (session.recheck);
        session.checked = true;
      } catch (error) {
        this.settings.log.once(`check:${String(error)}`, "warn", `checking context files failed: ${String(error)}`);
      } finally {
        session.validating = undefined;
      }
    })();
  }

  /** The session's memo as of now (what its next step will carry). */
  async current(sessionID: string): Promise<Memo | undefined> {
    if (this.disposed) return undefined;
    return this.memoFor(sessionID, this.sessions.get(sessionID));
  }

  forget(sessionID: string): void {
    this.sessions.delete(sessionID);
  }

  async dispose(): Promise<void> {
    this.disposed = true;
    this.sessions.clear();
    this.cache.clear();
    this.starts.clear();
    this.missingStarts.clear();
    this.chains.clear();
    this.walks.clear();
    await this.watcher?.close();
  }

  private async memoFor(sessionID: string, session: SessionState): Promise<Memo> {
    session.restoring ??= this.restore(sessionID, session);
    await session.restoring;
    await session.validating;
    // Without a watcher, check before the step, unless a check at the step boundary just did.
    if (this.statMode && session.memo !== undefined && !session.checked) await this.validate(session.memo);
    session.checked = false;
    const memo = session.memo;
    if (
      memo !== undefined &&
      memo.generation === this.cache.generation &&
      memo.version === session.version &&
      memo.hostKey === session.hostKey
    ) {
      return memo;
    }
    const fresh = await this.compute(session);
    session.memo = fresh;
    return fresh;
  }

  /** Checks by stat what `memo` was computed from: its directories' files, and directories it found missing. */
  private async validate(memo: Memo): Promise<void> {
    const appeared = await Promise.all(memo.missing.map((dir) => stat(dir).then(() => true, () => false)));
    if (appeared.includes(true)) this.cache.invalidate(memo.missing[appeared.indexOf(true)]!);
    await this.cache.revalidate(memo.dirs);
  }

  private async compute(session: SessionState): Promise<Memo> {
    // Read before any await: if the cache changes while computing, this memo is already stale.
    const generation = this.cache.generation;
    const version = session.version;
    const { hostKey, hostPaths } = session;
    const { systemTokens } = this.settings.options;

    if (this.generationSeen !== generation) {
      this.missingStarts.clear();
      this.chains.clear();
      this.generationSeen = generation;
    }
    // Known answers are taken as they are: only what is new costs a promise.
    const starts = await settle([this.settings.directory, ...session.touched].map((path) => this.starts.get(path) ?? this.missingStarts.get(path) ?? this.resolve(path)));
    const startDirs = new Set<string>();
    const missing: string[] = [];
    for (const start of starts) {
      if (start === undefined) continue;
      startDirs.add(start.dir);
      if (start.missing === undefined) continue;
      missing.push(start.missing);
      this.watcher?.expect(start.missing);
    }
    const dirs = new Set<string>();
    const chains = await settle(
      [...startDirs].map((dir) => {
        for (const visited of this.walkOf(dir)) dirs.add(visited);
        return this.chainOf(dir, generation);
      }),
    );

    const files: CachedFile[] = [];
    const seen = new Set<string>();
    for (const chain of chains) {
      for (const file of chain) {
        if (seen.has(file.path)) continue;
        seen.add(file.path);
        files.push(file);
      }
    }
    const shown = files.filter((file) => !hostPaths.has(file.path));
    const rendered = render(shown, systemTokens, await this.measure());
    const whole = new Set(shown.filter((file) => rendered.whole.has(file.rel)).map((file) => file.path));
    return { generation, version, hostKey, block: rendered.text, files, whole, dirs: [...dirs], missing };
  }

  private walkOf(dir: string): readonly string[] {
    let walk = this.walks.get(dir);
    if (walk === undefined) {
      walk = walkUp(dir, this.realRoot, this.settings.options.maxDepth);
      this.walks.set(dir, walk);
    }
    return walk;
  }

  /** The files that apply to `dir` (root first), walked once per generation. */
  private chainOf(dir: string, generation: number): CachedFile[] | Promise<CachedFile[]> {
    const known = this.chains.get(dir);
    if (known !== undefined) return known;
    const walking = discover(this.walkOf(dir), (visited) => this.cache.lookup(visited));
    this.chains.set(dir, walking);
    walking.then(
      (chain) => {
        if (this.generationSeen === generation && this.chains.get(dir) === walking) this.chains.set(dir, chain);
      },
      // The step that awaits it reports the failure; the walk is tried again next time.
      () => this.chains.get(dir) === walking && this.chains.delete(dir),
    );
    return walking;
  }

  /**
   * Where a touched path's walk starts: its real directory (a file's parent), or for a path that
   * does not exist yet, its nearest existing ancestor. Undefined when it lies outside the worktree
   * once symlinks are resolved.
   */
  private async resolve(path: string): Promise<Start | undefined> {
    const generation = this.cache.generation;
    let existing = path;
    let missing: string | undefined;
    for (;;) {
      try {
        const real = await realpath(existing);
        const info = await stat(real);
        const dir = info.isDirectory() ? real : dirname(real);
        if (!isInside(dir, this.realRoot)) return undefined;
        const start: Start = missing === undefined ? { dir } : { dir, missing: join(dir, basename(missing)) };
        // A path that exists keeps its answer; a missing one only until something changes.
        if (missing === undefined) this.starts.set(path, start);
        else if (generation === this.generationSeen) this.missingStarts.set(path, start);
        return start;
      } catch {
        const parent = dirname(existing);
        if (parent === existing || !isInside(parent, this.settings.worktree)) return undefined;
        missing = existing;
        existing = parent;
      }
    }
  }

  /** Rebuilds the touches of a session this instance has not seen (continued in a new process, or forgotten). */
  private async restore(sessionID: string, session: SessionState): Promise<void> {
    const messages = this.settings.client?.session?.messages;
    if (typeof messages !== "function") return;
    let expire: () => void = () => {};
    const timeout = new Promise<undefined>((resolve) => (expire = () => resolve(undefined)));
    const timer = setTimeout(() => expire(), HISTORY_TIMEOUT_MS);
    // A slow history read must not keep a finished process alive.
    timer.unref?.();
    try {
      const response = await Promise.race([messages.call(this.settings.client!.session, { path: { id: sessionID } }), timeout]);
      const history = (response as { data?: unknown } | undefined)?.data;
      if (!Array.isArray(history)) return;
      for (const message of history) {
        const parts = (message as { parts?: unknown })?.parts;
        if (!Array.isArray(parts)) continue;
        for (const part of parts) {
          const { type, tool, state } = (part ?? {}) as { type?: unknown; tool?: unknown; state?: { input?: unknown } };
          if (type === "tool") {
            session.touch(touchedDirectories(tool, state?.input, this.settings.directory, this.settings.worktree));
          }
        }
      }
    } catch (error) {
      this.settings.log.once(`history:${sessionID}`, "warn", `could not read the history of session ${sessionID}: ${String(error)}`);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * The host's own instruction files, from its `Instructions from: <path>` lines, found with a
   * plain substring search: OpenCode builds a new system prompt string for every request, and
   * comparing or regex-scanning all of it each time costs more than this.
   */
  private hostKeyOf(system: readonly string[]): string {
    let key = "";
    for (const part of system) {
      for (let at = part.indexOf(HOST_INSTRUCTIONS); at !== -1; at = part.indexOf(HOST_INSTRUCTIONS, at + 1)) {
        if (at > 0 && part[at - 1] !== "\n") continue;
        const end = part.indexOf("\n", at);
        const path = part.slice(at + HOST_INSTRUCTIONS.length, end === -1 ? undefined : end).trim();
        key = key === "" ? path : `${key}\n${path}`;
      }
    }
    return key;
  }

  private async hostPaths(hostKey: string): Promise<Set<string>> {
    if (hostKey === "") return new Set();
    const paths = hostKey.split("\n");
    const real = await Promise.all(paths.map((path) => this.realPath(path)));
    return new Set([...paths, ...real]);
  }

  /** `path` with symlinks resolved (itself if it cannot be), cached. */
  realPath(path: string): Promise<string> {
    let real = this.realPaths.get(path);
    if (real === undefined) {
      real = realpath(path).catch(() => path);
      this.realPaths.set(path, real);
    }
    return real;
  }

  /** One measure for the instance, so what it remembers of short texts serves every step. */
  private measure(): Promise<Measure<CachedFile>> {
    this.measuring ??= loadTokenizer().then(measurer);
    return this.measuring;
  }
}

/** The values of `items`, awaiting only those that are promises. */
async function settle<T>(items: readonly (T | Promise<T>)[]): Promise<T[]> {
  return items.some((item) => item instanceof Promise) ? Promise.all(items) : (items as T[]);
}

function depth(dir: string): number {
  let count = 0;
  for (const char of dir) if (char === "/") count++;
  return count;
}
