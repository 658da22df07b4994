import { dirname } from "node:path";
import { sha256Hex } from "../hash.ts";
import type { RenderedEntry } from "../block/render.ts";
import type { EntryMemo, FileSnapshot } from "../records/describe.ts";
import type { ToolPath } from "../host/tool-paths.ts";

/** How the model has a file: the whole text, a cut copy, or only its name (it did not fit). */
export type Held = "whole" | "cut" | "named";

/** What the conversation holds of one context file, and which part carries it. */
export interface Known {
  readonly sha256: string;
  readonly held: Held;
  /** "system" for the plugin's system block; else the tool call id or user message id whose text carries it. */
  readonly carrier: string;
  /** The directory the file applies to: its deletion is noticed while that directory is on a chain. */
  readonly dir: string;
  /** A cut: tokens of its text the carrier holds (exact where counted, else the provable bound). */
  readonly tokens?: number;
  /** Off the session's chains when delivered (an always, agent, pinned or rule file): its leaving is noticed wherever it is. */
  readonly loose?: true;
}

export const SYSTEM_CARRIER = "system";

/** What a note's carrier did about a file of the block: told it no longer applies, or unloaded it by its own call (and the pin that unload took away). */
export type Note = { readonly unloaded: false } | { readonly unloaded: true; readonly pin: ToolPath | undefined; readonly held: Known | undefined };
const TOLD: Note = Object.freeze({ unloaded: false });
/** Enough to see an id that comes back at every step (a step rarely makes more than a few dozen calls). */
const RECENT_CALLS = 64;
const NOTHING_CARRIED: ReadonlySet<string> = new Set();

/** Why the system block must be built again at the next step. */
export type Rebuild = "start" | "compacted" | "pruned";

/**
 * One session's state: what it touched (oldest first, re-touching moves a path to the end), and,
 * for cache-stable delivery, the frozen system block and what the conversation already holds.
 */
export class Session {
  readonly touched = new Map<string, ToolPath>();
  /** Grows when a path joins or leaves `touched`: what the hierarchy is made of changed. */
  version = 0;
  /** Grows when the recency order changes (a path touched again): only priorities changed. */
  order = 0;
  /** Grows when the oldest touched path is forgotten: what the hierarchy is made of shrank. */
  evictions = 0;
  /** The frozen system block, and the files it was built from (real paths). */
  system: { readonly text: string; readonly paths: ReadonlySet<string> } | undefined;
  rebuild: Rebuild | undefined = "start";
  /** Files that return to the system block at its next build: their carrier was pruned. */
  readonly returning = new Set<string>();
  /**
   * Compactions seen through `messages.transform` (a new summary message) and through the
   * `session.compacted` event, and how many of them a rebuild has handled: whichever comes first
   * asks for the rebuild, the other one is then no news. `hooked`: compactions the compacting hook
   * started; a new summary covers every one of them (the messages show only the latest summary, so
   * two compactions with no main request between them are one summary seen, and two events).
   */
  compactions = { seen: 0, evented: 0, handled: 0, hooked: 0, lastSummary: "" };
  /** Set by the compacting hook: the next messages OpenCode shows of the session are the compaction agent's (cleared by them, the compaction's event, or a main step). */
  compacting = false;
  /** Carriers with a part OpenCode pruned, judged for what their other parts still show, and their parts then (pruned/kept). */
  readonly prunesJudged = new Map<string, string>();
  /** After a compaction: whether the conversation still has a file where a carrier put it (OpenCode keeps recent turns verbatim); undefined when unknown. */
  present: ((carrier: string, path: string) => boolean) | undefined;
  private readonly knownFiles = new Map<string, Known>();
  /** How many files each directory has that the conversation knows only by name: a call reaching one may owe them. */
  private readonly namedByDir = new Map<string, number>();
  /** The files each carrier holds, so a pruned carrier is found without a scan. */
  private readonly carried = new Map<string, Set<string>>();
  /** The digests of the blocks appended under each carrier that still carries files. */
  private readonly blocks = new Map<string, Set<string>>();
  /** Tokens the plugin may still add to tool outputs and user messages in this step. */
  stepTokensLeft = 0;
  /** Files the host's system prompt carries itself (real paths), and the prompt they were judged on. */
  hostPaths: ReadonlySet<string> = new Set();
  /** Grows whenever hostPaths is a new set (memo keys use it, never the paths themselves). */
  hostRevision = 0;
  hostPrompt: string | undefined;
  /** Rebuilt from history once when first met in this process (a continued or forgotten session). */
  restoring: Promise<void> | undefined;
  /** Delivery work runs one at a time per session: parallel tool calls must not deliver a file twice. */
  private queue: Promise<unknown> = Promise.resolve();
  /** The (cache generation, touch version, host) a diff last found nothing to deliver for. */
  quietKey = "";
  /** Grows whenever what the conversation holds changes: a memo of a block built around it is then stale. */
  heldRevision = 0;
  /** User messages that came before the worktree's catalog was built: ranked for agent files once it is. */
  readonly unranked: string[] = [];
  /** Delivery "system": the last block, and what it was built from. */
  systemMemo: { readonly key: string; readonly text: string } | undefined;
  /** What the last system block (either delivery) gave each file, by real path. */
  systemEntries: ReadonlyMap<string, RenderedEntry> = new Map();

  /**
   * Paths pinned to the session (the project_context tool, the TUI, the `pin` option): a directory
   * brings its chain, a context file itself. Never forgotten like touches; order of pinning.
   */
  readonly pins = new Map<string, ToolPath>();
  /** Files taken out with `unload` (real path → the directory it applies to), until a touch there. */
  readonly unloaded = new Map<string, string>();
  /** Touches since the last unload: resolved at the next hierarchy, where they may bring a file back. */
  touchedSinceUnload: ToolPath[] = [];
  /** The agent of the latest user message, and its id. */
  agent: string | undefined;
  messageID: string | undefined;
  /** Files whose `paths:` a touched file matched: they stay, like any touch. */
  readonly matched = new Set<string>();
  /** `include: agent` files attached to its user messages (real path → score). */
  readonly attached = new Map<string, number>();
  /** Per loaded file with `watch:`, what stat said of each file it watches when last looked. */
  readonly watched = new Map<string, Map<string, string>>();
  /** When the watching files' targets were last stat'd, and which files (see Engine.checkWatches). */
  watchesChecked: { readonly at: number; readonly watchers: readonly unknown[] } | undefined;
  /** Notices not yet said (watch, unload), first come first: queued by notify, taken from the front only. */
  readonly notices: string[] = [];
  /** Per subject, its last notice queued and when (its number among all queued): see notify. */
  private readonly lastNotices = new Map<string, { readonly notice: string; readonly at: number }>();
  private queuedNotices = 0;
  /** Bytes of the session's steering file already applied, and which file that was (device and inode). */
  steer: { readonly file: string | undefined; readonly offset: number } = { file: undefined, offset: 0 };
  /** The last record's file list, and what it was made from: a step that changed nothing writes it again as is. */
  recordMemo: { readonly sources: readonly unknown[]; readonly snapshot: readonly FileSnapshot[]; readonly counts: number; readonly files: readonly string[] } | undefined;
  /** Each file's last record entry (see describeJson). */
  readonly recordEntries: EntryMemo = new WeakMap();

  constructor(
    readonly id: string,
    private readonly maxTouched: number,
  ) {}

  private lastTouched: string | undefined;

  /** Grows when a pin is added or removed: the hierarchy cannot be extended from the last one then. */
  pinRevision = 0;

  /**
   * Queues `notice` unless the last notice queued about `subject` (a watched file as one watching
   * file sees it, an unloaded file) is this very one, still waiting: a watched file that changes at
   * every step while its notice waits (a backlog past what the blocks hold) is told once, not once
   * per change, yet a change back (deleted, then created) is still told.
   */
  notify(notice: string, subject: string): void {
    // All told: what was queued before says nothing of what waits.
    if (this.notices.length === 0) this.lastNotices.clear();
    const last = this.lastNotices.get(subject);
    // Notices leave from the front only: those still waiting are the last `notices.length` queued.
    if (last?.notice === notice && last.at >= this.queuedNotices - this.notices.length) return;
    this.lastNotices.set(subject, { notice, at: this.queuedNotices++ });
    this.notices.push(notice);
    // A queue that never empties (a subject new at every step) lets go of the subjects told.
    if (this.lastNotices.size > 2 * this.notices.length + 64) {
      const firstWaiting = this.queuedNotices - this.notices.length;
      for (const [known, { at }] of this.lastNotices) if (at < firstWaiting) this.lastNotices.delete(known);
    }
  }

  pin(path: ToolPath): void {
    if (this.pins.has(path.path)) return;
    this.pins.set(path.path, path);
    this.version++;
    this.pinRevision++;
  }

  unpin(path: string): boolean {
    if (!this.pins.delete(path)) return false;
    this.version++;
    this.pinRevision++;
    return true;
  }

  /** Grows whenever `unloaded` changes: a diff that found nothing to deliver before may find a file back now. */
  unloadRevision = 0;

  /**
   * Takes a file out: the conversation is taken as not holding it, so it is sent again when it comes
   * back. Returns what the conversation held of it before (an undo of the unload puts it back).
   */
  unload(file: string, dir: string): Known | undefined {
    const held = this.knownFiles.get(file);
    this.unloaded.set(file, dir);
    this.unloadRevision++;
    this.touchedSinceUnload = [];
    this.drop(file);
    this.heldRevision++;
    return held;
  }

  reloadFile(file: string): void {
    if (!this.unloaded.delete(file)) return;
    this.unloadRevision++;
    this.heldRevision++;
  }

  /** Gives back unloaded files whose directory a touch since reached (`startOf` gives a touch's real directory). */
  reload(startOf: (touch: ToolPath) => string | undefined): void {
    if (this.touchedSinceUnload.length === 0) return;
    const reached = new Set(this.touchedSinceUnload.map(startOf));
    this.touchedSinceUnload = [];
    for (const [file, dir] of this.unloaded) if (reached.has(dir)) this.reloadFile(file);
  }

  touch(paths: readonly ToolPath[]): void {
    if (this.unloaded.size > 0 && this.touchedSinceUnload.length < this.maxTouched) this.touchedSinceUnload.push(...paths);
    for (const touched of paths) {
      const before = this.touched.get(touched.path);
      // A path once touched as a file stays one (grep names a file as its `path`; a read of it follows).
      const entry = before?.isFile === true ? before : touched;
      // Touching the latest path again changes nothing: the common case, kept free.
      if (this.lastTouched === touched.path && before?.isFile === entry.isFile) continue;
      this.lastTouched = touched.path;
      this.touched.delete(touched.path);
      this.touched.set(touched.path, entry);
      this.order++;
      if (before?.isFile !== entry.isFile) this.version++;
      if (this.touched.size > this.maxTouched) {
        const oldest = this.touched.keys().next().value;
        if (oldest !== undefined) this.touched.delete(oldest);
        this.evictions++;
      }
    }
  }

  /** Runs `work` after every earlier piece of this session's delivery work. */
  serially<T>(work: () => Promise<T>): Promise<T> {
    const run = this.queue.then(work, work);
    this.queue = run.catch(() => {});
    return run;
  }

  known(path: string): Known | undefined {
    return this.knownFiles.get(path);
  }

  knownPaths(): IterableIterator<string> {
    return this.knownFiles.keys();
  }

  hold(path: string, known: Known): void {
    this.drop(path, known.carrier);
    this.heldRevision++;
    this.knownFiles.set(path, known);
    if (known.held === "named") this.namedByDir.set(known.dir, (this.namedByDir.get(known.dir) ?? 0) + 1);
    let paths = this.carried.get(known.carrier);
    if (paths === undefined) this.carried.set(known.carrier, (paths = new Set()));
    paths.add(path);
  }

  /** `keeping`: a carrier about to hold the file again, whose blocks' digests stay. */
  drop(path: string, keeping?: string): void {
    const known = this.knownFiles.get(path);
    if (known === undefined) return;
    this.heldRevision++;
    this.knownFiles.delete(path);
    if (known.held === "named") {
      const left = (this.namedByDir.get(known.dir) ?? 1) - 1;
      if (left > 0) this.namedByDir.set(known.dir, left);
      else this.namedByDir.delete(known.dir);
    }
    const paths = this.carried.get(known.carrier);
    paths?.delete(path);
    if (paths?.size === 0) {
      this.carried.delete(known.carrier);
      if (known.carrier !== keeping) this.blocks.delete(known.carrier);
    }
  }

  /** A block the plugin appended to the output of `carrier` (a tool call's id; one id may name several outputs). */
  delivered(carrier: string, block: string): void {
    let digests = this.blocks.get(carrier);
    if (digests === undefined) this.blocks.set(carrier, (digests = new Set()));
    digests.add(sha256Hex(block));
  }

  /** The latest tool call ids seen, to tell a provider that reuses them (`call_0` at every step). */
  private readonly recentCalls: string[] = [];
  /** The session's provider gave two tool calls the same id. */
  reusesIds = false;

  /** A tool call ran under `callID`. */
  called(callID: string): void {
    if (this.reusesIds) return;
    if (this.recentCalls.includes(callID)) this.reusesIds = true;
    this.recentCalls.push(callID);
    if (this.recentCalls.length > RECENT_CALLS) this.recentCalls.shift();
  }

  /** Whether `block` is one the plugin appended under `carrier`, and not a tool's own text that looks like one. */
  deliveredOn(carrier: string, block: string): boolean {
    return this.blocks.get(carrier)?.has(sha256Hex(block)) === true;
  }

  /** Whether the conversation knows a file of `dir` only by name (of any kind: its own, its local variant, a rule file). */
  namesIn(dir: string): boolean {
    return this.namedByDir.has(dir);
  }

  /**
   * Per carrier, files of the frozen system block whose "no longer applies" or "disregard" notice it
   * carries: pruned, the notice no longer counters the block's copy, and the block is built again
   * without them. Cleared when the block is built.
   */
  private readonly notes = new Map<string, Map<string, Note>>();
  /**
   * Files of the block a project_context unload took out, for its call's after hook to name the carrier:
   * each with the `path` argument of the call that took it (parallel calls of a step all run before
   * their after hooks, and each must claim its own notice only).
   */
  readonly unloadedByTool: { readonly path: string; readonly note: Note; readonly arg: string }[] = [];
  /** Queued notices (a TUI's unload) about files of the block, by text: the delivery that tells one notes its carrier. */
  readonly noticeFiles = new Map<string, string>();

  noted(carrier: string, path: string, note: Note = TOLD): void {
    let paths = this.notes.get(carrier);
    if (paths === undefined) this.notes.set(carrier, (paths = new Map()));
    paths.set(path, note);
  }

  clearNotes(): void {
    this.notes.clear();
  }

  /** The last delivery that would only have named again files known by name: its nothing-changed key and budget. */
  namedOnly: { readonly key: string; readonly tokens: number } | undefined;

  /** Grows when a carrier leaves the conversation: a diff that found nothing to deliver before may find its files now. */
  vanishedRevision = 0;

  /** Where the conversation's latest message was at the last request, and its id: gone, turns were undone. */
  lastMessage: { readonly index: number; readonly id: unknown } | undefined;

  /** Every carrier but the system block: of files, or of notes. */
  *carriers(): IterableIterator<string> {
    for (const carrier of this.carried.keys()) if (carrier !== SYSTEM_CARRIER) yield carrier;
    for (const carrier of this.notes.keys()) if (!this.carried.has(carrier)) yield carrier;
  }

  /**
   * `carrier` left the conversation (its turn undone): the files it held are not the model's any
   * more (the next delivery that reaches them sends them again); the files of the block it said no
   * longer apply are returned.
   */
  vanished(carrier: string, present: (carrier: string) => boolean): string[] {
    this.vanishedRevision++;
    for (const path of [...(this.carried.get(carrier) ?? [])]) this.drop(path);
    const noted = this.notes.get(carrier);
    this.notes.delete(carrier);
    // The call's own unload undone with its turn: the file is back, held where it was (the block, an
    // output still there), and so is the pin the unload took away. A notice told (a deletion, a TUI's
    // unload) undone: the block must be built again without the file.
    const returned: string[] = [];
    for (const [path, note] of noted ?? []) {
      if (!note.unloaded) {
        if (this.system?.paths.has(path) === true) returned.push(path);
        continue;
      }
      this.reloadFile(path);
      if (note.held !== undefined && present(note.held.carrier) && this.knownFiles.get(path) === undefined) this.hold(path, note.held);
      if (note.pin !== undefined) this.pin(note.pin);
    }
    return returned;
  }

  /**
   * The user took `path` out (the TUI's unload): the undo of an earlier unload of it by the model
   * gives back neither the file nor its pin; it only says the model's notice is gone.
   */
  userUnloaded(...names: string[]): void {
    const named = (path: string | undefined) => path !== undefined && names.includes(path);
    for (const paths of this.notes.values()) {
      for (const [file, note] of paths) if (note.unloaded && (named(note.pin?.path) || named(file) || named(dirname(file)))) paths.set(file, TOLD);
    }
  }

  /** Lets go of the files `carrier` holds that `stillShown` says none of its outputs shows any more (see vanished). */
  forgetUnshown(carrier: string, stillShown: (path: string) => boolean): void {
    for (const path of [...(this.carried.get(carrier) ?? [])]) {
      if (stillShown(path)) continue;
      this.vanishedRevision++;
      this.drop(path);
    }
  }

  /** The files `carrier` holds now. */
  carriedBy(carrier: string): ReadonlySet<string> {
    return this.carried.get(carrier) ?? NOTHING_CARRIED;
  }

  carries(carrier: string): boolean {
    return carrier !== SYSTEM_CARRIER && (this.carried.has(carrier) || this.notes.has(carrier));
  }

  /** The files `carrier` held; they are no longer known to the model. */
  /** The files `carrier` held that `stillShown` says no kept part of its id shows: they are no longer known to the model. */
  pruned(carrier: string, stillShown: (path: string) => boolean): string[] {
    const paths = [...(this.carried.get(carrier) ?? [])].filter((path) => !stillShown(path));
    for (const path of paths) this.drop(path);
    const noted = this.notes.get(carrier);
    this.notes.delete(carrier);
    // A note's prune matters only for a file the frozen block shows: built again without it.
    return noted === undefined ? paths : [...paths, ...[...noted.keys()].filter((path) => this.system?.paths.has(path) === true)];
  }
}
