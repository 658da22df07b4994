import type { FSWatcher } from "chokidar";
import { basename, dirname } from "node:path";

export interface WatchSettings {
  fileNames: readonly string[];
  /** Directories watched at most; past it, directories are left to stat validation. */
  capacity: number;
  /** A directory's context file may have been created, edited or deleted: check it. */
  onChange: (dir: string) => void;
  /** A directory that a walk expected appeared or went: what touched paths resolve to may differ. */
  onStructure: (dir: string) => void;
  /** The watcher cannot do its job (inotify limit, too many open files…): the caller must validate by stat. */
  onFailure: (error: Error) => void;
}

/**
 * Errors that mean the watcher as a whole cannot work (out of inotify watches or file descriptors).
 * Any other error concerns one entry (a symlink loop, a permission): the cache reports unreadable
 * candidates itself and stat validation after tool calls still covers them.
 */
const SYSTEMIC = new Set(["ENOSPC", "EMFILE", "ENFILE"]);

/**
 * chokidar drops a file's `change` events that come within 50 ms of the previous one, so the last
 * of two quick edits would never be reported. Every report is followed by one more check of the
 * same directory this long after the last event.
 */
const TRAILING_CHECK_MS = 60;

/**
 * Watches exactly the directories on known chains, one level deep and only for the candidate file
 * names, never a tree recursively. A directory that does not exist yet is awaited through its parent
 * (`expect`), so a context file created in a new directory is seen too.
 *
 * At most `capacity` directories are watched, the first ones needed (which include the top of every
 * chain): a watch costs ~20 KB of native memory in Bun. The others stay correct without a watch: the
 * engine checks every file a session depends on by stat after each tool call and each user message.
 * (chokidar's `unwatch` of a directory also drops everything below it, so watches are never let go
 * one by one to make room.)
 */
export class DirectoryWatcher {
  /** chokidar, loaded and started on the first watch (its import would cost start-up ~12 ms). */
  private watcher: Promise<FSWatcher | undefined> | undefined;
  private readonly watched = new Set<string>();
  private readonly expected = new Set<string>();
  private readonly trailing = new Map<string, ReturnType<typeof setTimeout>>();
  private failed = false;
  private closed = false;

  constructor(private readonly settings: WatchSettings) {}

  /** Number of directories watched: the figure the benchmark reports. */
  get count(): number {
    return this.watched.size;
  }

  /** Watch an existing directory for its candidate files, while there is room. */
  watch(dir: string): void {
    if (!this.usable() || this.watched.has(dir) || this.watched.size >= this.settings.capacity) return;
    this.watched.add(dir);
    // After the step that needed the directory: chokidar's first scan of it is not the step's to wait for.
    setImmediate(() => void this.instance().then((watcher) => watcher?.add(dir)));
  }

  /** Note a directory on a chain that does not exist (yet): its creation in a watched parent is reported. */
  expect(dir: string): void {
    if (this.usable()) this.expected.add(dir);
  }

  async close(): Promise<void> {
    this.closed = true;
    const pending = this.watcher;
    this.watcher = undefined;
    this.watched.clear();
    this.expected.clear();
    for (const timer of this.trailing.values()) clearTimeout(timer);
    this.trailing.clear();
    const watcher = await pending;
    if (watcher === undefined) return;
    clearThrottleTimers(watcher);
    const closing = watcher.close();
    // close() drops every listener, but stats already under way may still fail: an error emitted with
    // no listener would throw inside chokidar and take the host process down.
    watcher.on("error", () => {});
    await closing.catch(() => {});
  }

  private usable(): boolean {
    return !this.closed && !this.failed;
  }

  private instance(): Promise<FSWatcher | undefined> {
    this.watcher ??= import("chokidar").then(
      ({ watch }) => (this.closed ? undefined : this.start(watch)),
      (error: Error) => {
        this.fail(error);
        return undefined;
      },
    );
    return this.watcher;
  }

  private start(watch: typeof import("chokidar").watch): FSWatcher | undefined {
    const names = new Set(this.settings.fileNames);
    let watcher: FSWatcher;
    try {
      watcher = watch([], {
        depth: 0,
        // A directory's first scan reports what is there: a file created between the plugin's read and
        // the watch taking hold is caught that way (the cache compares by stat, so no needless re-read).
        ignoreInitial: false,
        // Every event is checked by stat, so there is no need for chokidar to hold back an unlink for
        // 100 ms to recognise an editor's atomic save.
        atomic: false,
        // The plugin must never be what keeps OpenCode's process alive.
        persistent: false,
        // A context file that is a symlink is checked by stat, never watched through: that would put
        // watches on targets outside the worktree, or loop.
        followSymlinks: false,
        ignored: (path) => !(this.watched.has(path) || this.expected.has(path) || names.has(basename(path))),
      });
    } catch (error) {
      this.fail(error as Error);
      return undefined;
    }
    const report = (path: string) => this.changed(dirname(path));
    watcher.on("add", report).on("change", report).on("unlink", report);
    const reportDir = (path: string) => {
      if (this.watched.has(path)) return this.changed(path);
      this.settings.onStructure(path);
      this.settings.onStructure(dirname(path));
    };
    watcher.on("addDir", reportDir).on("unlinkDir", reportDir);
    watcher.on("error", (error) => {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === undefined || SYSTEMIC.has(code)) this.fail(error as Error);
    });
    return watcher;
  }

  private changed(dir: string): void {
    this.settings.onChange(dir);
    clearTimeout(this.trailing.get(dir));
    const timer = setTimeout(() => {
      this.trailing.delete(dir);
      if (!this.closed) this.settings.onChange(dir);
    }, TRAILING_CHECK_MS);
    timer.unref?.();
    this.trailing.set(dir, timer);
  }

  private fail(error: Error): void {
    if (this.failed) return;
    this.failed = true;
    this.settings.onFailure(error);
    void this.close();
  }
}

type Throttled = Map<string, Map<string, { timeoutObject?: ReturnType<typeof setTimeout> }>>;

/**
 * chokidar's close() forgets its throttle timers without clearing them: a directory read still
 * under way leaves a ref'd one-second timer that holds the process after dispose. chokidar is pinned
 * (5.0.0) for this reach into its internals; should the field ever go, this does nothing.
 */
function clearThrottleTimers(watcher: FSWatcher): void {
  const throttled = (watcher as unknown as { _throttled?: Throttled })._throttled;
  if (!(throttled instanceof Map)) return;
  for (const byPath of throttled.values()) for (const item of byPath.values()) clearTimeout(item.timeoutObject);
}
