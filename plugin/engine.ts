import type { PluginInput } from "@opencode-ai/plugin";
import { existsSync, realpathSync, statSync } from "node:fs";
import { basename, dirname, isAbsolute, join, relative, resolve } from "node:path";
import { clearDocs, compose, countsRevision, docOf, knownTokens, wholeSections, type BlockKind, type ComposeExtras, type Composed } from "./block/compose.ts";
import { CRITICAL_TIER, frameCost, headCost } from "./block/plan.ts";
import { escapeInline, escapePath } from "./block/escape.ts";
import { appendedBlock, deletedNotice, leftOutListOf, sectionPrefix, unloadNotice, WHOLE_TAIL, watchNotice, type WatchChange } from "./block/render.ts";
import { disposeTokens, textBound } from "./block/tokens.ts";
import type { FileVersion } from "./files/contained.ts";
import { readContained } from "./files/contained.ts";
import { candidatesOf, FileStore } from "./files/store.ts";
import { replaceFile, spliceSection } from "./files/update.ts";
import { walkUp } from "./files/walk.ts";
import { describe, describeJson, sameFile, snapshotFiles, type FileSnapshot } from "./records/describe.ts";
import { isSessionId, parseSteer, readFrom, RECORDS_VERSION, recordJson, recordsDirOf, steerPath, type FileRecord } from "./records/format.ts";
import { RecordsWriter } from "./records/writer.ts";
import { readHistory, scanMessages, type KeptOutput } from "./host/history.ts";
import { HOST_MARKER, hostCarries, hostEntryPaths, reminderCarries, reminderOf, stripReminder } from "./host/instructions.ts";
import { CONTEXT_TOOL, toolPaths } from "./host/tool-paths.ts";
import type { Logger } from "./log.ts";
import { containedPrint, isInside, realPathOr, relativePosix, statPrint, throughDotGit } from "./paths.ts";
import { contextNamesOf } from "./files/names.ts";
import { NearIgnores, readIgnoreBasis, type IgnoreBasisResult } from "./files/worktree-index.ts";
import { DEFAULT_OPTIONS, type ResolvedOptions } from "./options.ts";
import { inSlices, nextTurn } from "./turns.ts";
import { applyRules, awaitedBy, hasImports, type Ruled } from "./rules/apply.ts";
import type { Catalog } from "./rules/catalog.ts";
import { appliesToAgent, describeProblem, matchesWatch, readContract, type Contract, type MatchWork } from "./rules/contract.ts";
import type { ImportRead } from "./rules/imports.ts";
import { extendHierarchy, hierarchyOf, type Hierarchy } from "./session/hierarchy.ts";
import { SYSTEM_CARRIER, type Held, type Known, type Session } from "./session/session.ts";
import { Sessions } from "./session/sessions.ts";

export interface EngineSettings {
  /** Where relative tool paths resolve and where every session's own chain starts. */
  directory: string;
  /** The walk's upper bound, as OpenCode names it. */
  worktree: string;
  options: ResolvedOptions;
  log: Logger;
  client: PluginInput["client"] | undefined;
}

/** A tool's result as `tool.execute.after` gets it (MCP tools give other shapes: left alone). */
export interface ToolResult {
  output?: unknown;
  metadata?: unknown;
}

/** The project_context tool's arguments, as the model sends them ("" for what an action does not use). */
export interface ContextToolArgs {
  readonly action: "list" | "load" | "unload" | "update";
  readonly path: string;
  readonly section: string;
  readonly content: string;
}

/** OpenCode's permission check, as the tool context gives it (rejects when the user or the agent's rules deny). */
export type ContextToolAsk = (request: { permission: string; patterns: string[]; always: string[]; metadata: Record<string, unknown> }) => Promise<void>;

const HISTORY_TIMEOUT_MS = 3000;
/** The instruction file names OpenCode looks up the session's chain, in its order of precedence. */
const HOST_LOADED_NAMES: readonly string[] = ["AGENTS.md", "CLAUDE.md", "CONTEXT.md"];
/**
 * The default names' base and override files (AGENTS.md, CLAUDE.md, AGENTS.override.md, …): only these
 * load when git ignores them (a personal CLAUDE.md). A name the fileNames option adds must name a file
 * git does not ignore: a project's opencode.json may set fileNames to [".env"].
 */
const DEFAULT_NAMES: ReadonlySet<string> = new Set(candidatesOf(DEFAULT_OPTIONS.fileNames).filter((candidate) => candidate.kind !== "local").map((candidate) => candidate.name));

/** Bytes of a steering file read at most per step: a TUI writes a short line per pin. */
const MAX_STEER_READ = 64 * 1024;
/** Unloads whose call's after hook has not come yet, kept at most per session. */
const MAX_UNCLAIMED_UNLOADS = 1024;
/** Files one `watch:` checks at most (each is one stat per check of the sessions that load it). */
const MAX_WATCH_TARGETS = 256;
/**
 * Matching steps (see matchSequence) a watching file's globs may take against the worktree index
 * (its answer is kept until the index changes). Four ordinary globs over 10,000 paths take 0.4
 * million; 256-character globs against deep paths of long names took 37 s for 2,002 paths, and
 * now a first system transform takes about 25 ms (probe).
 */
const MAX_WATCH_WORK = 2_000_000;
/** Real paths of touched files remembered at most (sessions hold up to maxTouchedDirs paths each). */
const MAX_REAL_PATHS = 16_384;
/** Below this many tokens left in a step, nothing more is delivered until the next step. */
const MIN_DELIVERY_TOKENS = 64;

/** What the plan's list of `pending` files left out costs at least (a bare count): a block of `kind` is not made without room for it. */
function listRoomFor(kind: BlockKind, pending: number): number {
  return pending === 0 ? 0 : textBound(leftOutListOf(kind, [], pending, Number.MAX_SAFE_INTEGER));
}

/** The room a block of `items` keeps for its list of files left out: none when all of them whole (`updated` ones with their longer head) cost less. */
function listRoomBeside(kind: BlockKind, items: readonly { file: FileVersion }[], updated?: ReadonlySet<string>): number {
  const list = listRoomFor(kind, items.length);
  let whole = 0;
  for (const { file } of items) if ((whole += wholeCost(file, updated?.has(file.path) === true)) >= list) return list;
  return whole;
}

/** What a file sent whole costs in a block, as the plan weighs it: its section's head and tail, and its exact count or provable bound. */
function wholeCost(file: FileVersion, updated: boolean): number {
  return headCost(docOf(file), updated, textBound) + textBound(WHOLE_TAIL) + knownTokens(file);
}

/**
 * The notices the next block of `kind` says, first come first: as many as half of what `budget` (what
 * the block may take) leaves past the block's frame (with its `deleted` files' notices) holds, and at
 * least one if it fits there whole; the files come first. The rest wait for the next block, so a
 * burst (a watching file's 256 targets changed at once) is told over the next blocks, each notice
 * once, and never leaves a block empty. A notice that a whole block (`blockBudget`) cannot hold could
 * never be told: it is let go (`letGo`).
 */
function noticesFor(notices: string[], kind: BlockKind, deleted: readonly string[], budget: number, blockBudget: number, letGo: (notice: string) => void): string[] {
  // Most blocks have none: nothing to weigh (a delivery is made at every tool call).
  if (notices.length === 0) return [];
  // The block's frame by the bound planning uses (plan.ts weighs notices the same way).
  const frame = frameCost(kind, [], textBound);
  while (notices.length > 0 && textBound(notices[0]!) > blockBudget - frame) letGo(notices.shift()!);
  const used = deleted.length === 0 ? frame : frameCost(kind, deleted, textBound);
  let left = (budget - used) / 2;
  let count = 0;
  for (const notice of notices) {
    const cost = textBound(notice);
    if (cost > left && !(count === 0 && cost <= budget - used)) break;
    left -= cost;
    count++;
  }
  return notices.slice(0, count);
}

/**
 * The catalog is built, and the libraries loaded, once start-up and the steps have left the event
 * loop alone this long (or, under steady work, CATALOG_MAX_DEFER_MS after start): their git walks,
 * reads and module loads would otherwise share the CPU with the first steps of a session that starts
 * at once. OpenCode sends a session's first message 0.2-1.3 s after it starts the plugin (measured),
 * so there both are under way 50 ms after start.
 */
const QUIET_MS = 50;
const CATALOG_MAX_DEFER_MS = 1000;
/** Context-file events kept while the catalog is built, for it to hear once built. */
const MAX_MISSED_CANDIDATES = 4096;
/** User messages kept per session for ranking once the catalog is built. */
const MAX_UNRANKED = 8;

/**
 * The plugin's shared state and the work behind every hook: what each session touched, one store
 * of context files for all sessions, and what each session's conversation already holds, so that
 * every file reaches the model once, fresh, and the system prompt stays byte-identical between
 * compactions (delivery "stable"), or is rebuilt every step (delivery "system").
 */
export class Engine {
  readonly sessions: Sessions;
  private disposed = false;
  /** The hierarchy last computed per session, with what it was computed from. */
  private readonly hierarchies = new WeakMap<Session, { key: string; base: string; evictions: number; order: number; hierarchy: Hierarchy }>();
  /**
   * The hierarchy after the rules, per session, and what it was made from; `checked`: the touched
   * files the rules (or a later check against the waiting files) have seen.
   */
  private readonly ruled = new WeakMap<Session, { key: string; hierarchy: Hierarchy; ruled: Ruled; checked: Set<string>; version: number }>();
  /** Touched files' real paths, by path, with the start they were worked out from (the rules ask for all of them). */
  private readonly realPaths = new Map<string, { readonly start: string; readonly real: string }>();
  /** A context file override's name → the base name it replaces. */
  private readonly replaces: ReadonlyMap<string, string>;
  /** Each watching contract's targets, for the index listing they were matched against. */
  private readonly targets = new WeakMap<Contract, { files: readonly string[] | undefined; targets: readonly string[]; capped: "targets" | "work" | undefined }>();
  /** The worktree's always, agent and manual files; undefined until its index is built. */
  private catalog: Catalog | undefined;
  private catalogReady: Promise<void> | undefined;
  /** Started and not settled yet (built, or failed: then there is none). */
  private catalogBuilding = false;
  /** Steps reading their hierarchy now, and the catalog's reads waiting for none to be: the catalog gives way to steps. */
  private reading = 0;
  /** When a step last read its hierarchy: the catalog waits for a quiet moment. */
  private lastRead = performance.now();
  /** Steps waiting to read (for git's settings of ignoring): busy too, for the quiet moment. */
  private waitingToRead = 0;
  private readonly idleWaiters: (() => void)[] = [];
  /** Context or rule files created, changed or deleted while the catalog was being built (it listed the worktree before). */
  private readonly missedCandidates = new Set<string>();
  /** Something waits for the catalog (a step that needs it, the tool, explain): it starts at once. */
  private catalogWanted = false;
  private wakeQuiet: (() => void) | undefined;
  /**
   * Until the catalog is built: what git ignores, from its settings and the .gitignore files on the
   * way to the directories a step is about to read (undefined when git cannot tell: no repository,
   * no git; steps wait for the catalog's walk then). Steps do not wait for the worktree's listing.
   */
  private near: Promise<NearIgnores | undefined> | undefined;
  /** `near` once it answers. */
  private nearNow: NearIgnores | undefined;
  /** OpenCode's instruction file name on the session's chain, for a host prompt (see hostLoadedName). */
  private hostName: { readonly start: string; readonly prompt: string; readonly name: string | undefined } | undefined;

  /** Undefined when records are off. */
  readonly records: RecordsWriter | undefined;

  private constructor(
    private readonly settings: EngineSettings,
    readonly store: FileStore,
    /** git's settings of ignoring, asked for at creation. */
    private readonly basis: Promise<IgnoreBasisResult>,
  ) {
    const { options } = settings;
    // A release runs on in later turns of the event loop: what goes wrong there is logged, never unhandled.
    const release = (sessionID: string) => void store.release(sessionID).catch((error: unknown) => settings.log.log("warn", `letting go of session ${sessionID}'s watches failed: ${String(error)}`));
    this.sessions = new Sessions(options.maxTouchedDirs, release, undefined, (session) => this.pinDefaults(session));
    this.replaces = contextNamesOf(options.fileNames).replaces;
    // Records are written at a quiet moment: a first step met the first one's write (loading
    // node:fs/promises, making the line and the directory) in the turn its chain read waited for.
    const recordsDir = recordsDirOf(options.recordsDir);
    if (options.records && recordsDir.problem !== undefined) settings.log.log("warn", recordsDir.problem);
    this.records = options.records ? new RecordsWriter(recordsDir.dir, settings.log, () => this.quietIn()) : undefined;
  }

  static async create(settings: EngineSettings): Promise<Engine> {
    const { options, log } = settings;
    // git's settings of ignoring are asked first (a session's first step waits for them): the two
    // gits run while the store is set up. An unexpected failure is an answer too (the catalog's walk then).
    const basis = readIgnoreBasis(realPathOr(settings.worktree), indexLogOf(log)).catch((error: unknown) => ({ ok: false as const, code: null, why: String(error) }));
    let engine: Engine | undefined;
    const store: FileStore = new FileStore({
      // A trailing slash: `.gitignore` rules such as `build/` match directories only.
      isIgnored: (dir) => dir !== store.realRoot && engine?.isIgnored(dir) === true,
      // A name the options added (a project's opencode.json may add `.env`) loads only if git does not ignore its file;
      // and no name loads what lies in .git (a committed link CLAUDE.md -> .git/config), whatever the index knows.
      isIgnoredFile: (path) => throughDotGit(relativePosix(store.realRoot, path)) || (!DEFAULT_NAMES.has(basename(path)) && engine?.isIgnored(path, false) === true),
      onCandidate: (path) => engine?.candidateChanged(path),
      worktree: settings.worktree,
      fileNames: options.fileNames,
      maxDepth: options.maxDepth,
      maxFileBytes: options.maxFileBytes,
      maxCacheBytes: options.maxCacheBytes,
      watch: options.watch,
      maxWatchedDirs: options.maxWatchedDirs,
      log,
    });
    engine = new Engine(settings, store, basis);
    return engine;
  }

  /**
   * Builds the worktree's catalog (always, agent, manual and rule files) in the background, once the
   * steps leave the event loop alone (quietMoment); no step waits for it but one that needs it (see
   * fresh). `loadLibraries` (gray-matter and the like, each in a task of its own) runs when the catalog
   * meets the first file whose frontmatter needs them, before it parses that file: a worktree whose
   * frontmatter is all of the plain shape read without them (frontmatter.ts) never loads them. git's
   * settings of ignoring are asked at once: until the catalog is built, they and the .gitignore files
   * on the way judge what a step reads.
   */
  startCatalog(loadLibraries?: () => Promise<void>): void {
    const { options, log } = this.settings;
    if (this.catalogReady !== undefined || this.disposed) return;
    this.catalogBuilding = true;
    const basis = this.basis;
    this.near = basis.then((answer) => (answer.ok ? (this.nearNow = new NearIgnores(this.store.realRoot, answer, indexLogOf(log))) : undefined));
    // Not built at all when the plugin is disposed while it waits for a quiet moment. Its module (with
    // the ranking and its stemmer) loads then too: a first step does not need it, and starts sooner.
    this.catalogReady = this.quietMoment().then(async () => (this.disposed ? undefined : (await import("./rules/catalog.ts")).Catalog.build({
      ...(loadLibraries === undefined ? {} : { loadLibraries }),
      basis,
      worktree: this.store.realRoot,
      fileNames: options.fileNames,
      rules: options.rules,
      maxEntries: options.maxIndexEntries,
      maxFileBytes: options.maxFileBytes,
      watch: options.watch,
      log,
      giveWay: () => (this.reading === 0 ? undefined : new Promise<void>((resolve) => this.idleWaiters.push(resolve))),
    }))).then(
      (catalog) => {
        if (this.disposed) return catalog?.dispose();
        this.catalog = catalog;
        for (const path of this.missedCandidates) catalog?.heard(path);
        this.missedCandidates.clear();
        // In use already: ranking's indexes follow in the background.
        catalog?.prepareRanking().catch((error: unknown) => log.once("ranking", "warn", `the agent files' ranking indexes could not be prepared (a message ranks them itself): ${String(error)}`));
      },
      (error: unknown) => log.once("catalog", "warn", `the worktree's always, agent and manual files are not known: ${String(error)}`),
    ).finally(() => {
      this.catalogBuilding = false;
      this.near = undefined;
      this.nearNow = undefined;
    });
  }

  /** A store watch saw a context file name created, changed or deleted: the catalog hears of it, now or once built. */
  private candidateChanged(path: string): void {
    if (this.catalog !== undefined) return this.catalog.heard(path);
    if (!this.catalogBuilding) return;
    if (this.missedCandidates.size < MAX_MISSED_CANDIDATES) this.missedCandidates.add(path);
    else this.settings.log.once("missed-candidates", "warn", `more than ${MAX_MISSED_CANDIDATES} context files changed while the worktree's catalog was built: the always, agent and manual files among the others are found at the next start`);
  }

  /** Milliseconds until steps will have left the event loop alone for QUIET_MS (at least QUIET_MS while one reads or waits to); 0: quiet now. */
  private quietIn(): number {
    if (this.reading > 0 || this.waitingToRead > 0) return QUIET_MS;
    return Math.max(0, this.lastRead + QUIET_MS - performance.now());
  }

  /** Resolves once no step has read for QUIET_MS (or CATALOG_MAX_DEFER_MS from now), or something waits for the catalog. */
  private async quietMoment(): Promise<void> {
    const latest = performance.now() + CATALOG_MAX_DEFER_MS;
    for (;;) {
      const now = performance.now();
      const wait = this.quietIn();
      if (wait === 0 || this.catalogWanted || now >= latest || this.disposed) return;
      await new Promise<void>((resolve) => {
        this.wakeQuiet = resolve;
        setTimeout(resolve, Math.max(1, Math.min(wait, latest - now)));
      });
    }
  }

  /**
   * Whether git ignores `dir` (a real directory below the root): the index says, or before it is
   * built NearIgnores (git's settings and the .gitignore files on the way, read as asked), so that a
   * step reads nothing git ignores without waiting for the worktree's listing.
   */
  private isIgnored(dir: string, directory = true): boolean {
    const rel = `${relativePosix(this.store.realRoot, dir)}${directory ? "/" : ""}`;
    if (this.catalogBuilding) return this.nearNow?.isIgnored(rel) === true;
    return this.catalog?.index?.isIgnored(rel) === true;
  }

  /**
   * What a step waits for before it reads: before the catalog is built, git's settings of ignoring
   * (or, when git cannot tell them, the catalog and its walk). Outside `reading`, so that the catalog
   * does not wait for a step that waits for it.
   */
  private async readyToRead(): Promise<void> {
    if (!this.catalogBuilding || this.nearNow !== undefined) return;
    this.waitingToRead++;
    try {
      if ((await this.near) === undefined) await this.catalogBuilt();
    } finally {
      this.waitingToRead--;
    }
  }

  get delivery(): "stable" | "system" {
    return this.settings.options.delivery;
  }

  /** Records what a tool call touches. Synchronous and free of I/O: it runs before every tool. */
  touch(sessionID: string, tool: unknown, args: unknown): void {
    if (this.disposed) return;
    const paths = toolPaths(tool, args, this.settings.directory, this.settings.worktree);
    if (paths.length > 0) this.sessions.get(sessionID).touch(paths);
  }

  /**
   * The block for this step's system prompt. Stable delivery: the frozen block, built again only at
   * the session's start, after a compaction, or when a pruned tool output sends files back.
   */
  async system(sessionID: string, prompt: readonly string[]): Promise<string> {
    if (this.disposed) return "";
    const session = this.sessions.get(sessionID);
    // A main step: a compaction whose event never came is over.
    session.compacting = false;
    await this.restore(session);
    this.steer(session);
    session.stepTokensLeft = this.settings.options.deliveryTokens;
    // OpenCode's header is its first entry, unless a plugin before this one put another in front: all are read.
    const text = await this.systemBlock(session, prompt.length === 1 ? prompt[0]! : prompt.join("\n"));
    this.record(session);
    return text;
  }

  private async systemBlock(session: Session, host: string): Promise<string> {
    if (this.delivery === "system") {
      const hierarchy = await this.fresh(session, true);
      this.judgeHost(session, host, hierarchy);
      // A read reminder's file is left out while its output lasts: after a compaction, only if a kept turn still has it.
      if (session.rebuild === "compacted") this.forgetSummarized(session);
      // The same inputs give the same bytes: built again only when the hierarchy, the host's files or what the conversation holds changed.
      const key = `${this.hierarchies.get(session)?.key}:${this.ruled.get(session)?.key}:${session.hostRevision}:${session.heldRevision}`;
      if (session.systemMemo?.key === key && session.notices.length === 0) return session.systemMemo.text;
      const held = (file: FileVersion) => session.known(file.path)?.sha256 === file.sha256;
      const items = this.items(session, hierarchy, (file) => !session.hostPaths.has(file.path) && !held(file));
      // Notices leave room for the list of what does not fit (the plan makes no block without it, and
      // this block is made again each step: a notice that took it emptied every block after), unless
      // everything fits whole for less, and for critical files that fit: the notices wait rather than
      // grow the block. One that never fits beside them is let go.
      const room = this.settings.options.systemTokens - (session.notices.length === 0 ? 0 : this.noticeReserve("system", items, this.settings.options.systemTokens));
      const notices = noticesFor(session.notices, "system", [], room, room, this.noticeLetGo);
      if (session.systemMemo?.key === key && notices.length === 0) return session.systemMemo.text;
      const composed = await this.compose("system", items, this.settings.options.systemTokens, { notices, owner: session.id });
      // No exact counts (logged): no block this step, the notices kept for the next one.
      if (composed.failed) return "";
      // An empty block (its frame alone over the budget) told none.
      if (composed.text !== "") session.notices.splice(0, notices.length);
      session.systemEntries = entriesByPath(composed);
      // A block with notices is said once: the next step builds the block without them.
      session.systemMemo = notices.length === 0 ? { key, text: composed.text } : undefined;
      return composed.text;
    }
    if (session.rebuild === undefined && session.returning.size === 0 && session.system !== undefined) {
      // The host's own files only matter when the block is built; judging them costs a string compare.
      if (host !== session.hostPrompt) this.judgeHost(session, host, this.current(session));
      return session.system.text;
    }
    const hierarchy = await this.fresh(session, true);
    this.judgeHost(session, host, hierarchy);
    const previous = session.system?.paths ?? new Set<string>();
    const rebuild = session.rebuild;
    if (rebuild === "compacted") this.forgetSummarized(session);
    // Whatever the reason for the build, a file a live tool output or message carries whole is not
    // repeated; nor one it carries at an older version, whole or cut: in the block, the newer text
    // would come before the older one, which the model reads as the latest. The next delivery sends
    // the new text after it, as for any edit.
    const heldElsewhere = (file: FileVersion) => {
      const known = session.known(file.path);
      return known !== undefined && known.carrier !== SYSTEM_CARRIER && (known.held === "whole" || (known.held === "cut" && known.sha256 !== file.sha256));
    };
    const wanted = (file: FileVersion) => rebuild === "start" || rebuild === "compacted" || previous.has(file.path) || session.returning.has(file.path);
    const items = this.items(session, hierarchy, (file) => !session.hostPaths.has(file.path) && !heldElsewhere(file) && wanted(file));
    const composed = await this.compose("system", items, this.settings.options.systemTokens, { owner: session.id });
    // No exact counts (logged): no block this step, and the build is tried again at the next one.
    if (composed.failed) return "";
    this.remember(session, composed, SYSTEM_CARRIER, hierarchy);
    // A file the last block held that this one does not (it left the hierarchy since, its touch
    // forgotten, say) is no longer the model's: held still, it was never sent when it applied again.
    const inBlock = new Set(composed.entries.map((entry) => entry.key));
    for (const path of [...session.carriedBy(SYSTEM_CARRIER)]) if (!inBlock.has(path)) session.drop(path);
    session.systemEntries = entriesByPath(composed);
    session.clearNotes();
    session.system = { text: composed.text, paths: new Set(items.map((item) => item.file.path)) };
    session.rebuild = undefined;
    session.present = undefined;
    session.compactions.handled = Math.max(session.compactions.seen, session.compactions.evented);
    session.returning.clear();
    return composed.text;
  }

  /** After a compaction: the summary replaced what came before it; the turns OpenCode kept verbatim still carry their files. */
  private forgetSummarized(session: Session): void {
    const present = session.present;
    for (const path of [...session.knownPaths()]) {
      const carrier = session.known(path)!.carrier;
      if (present === undefined || carrier === SYSTEM_CARRIER || !present(carrier, path)) session.drop(path);
    }
    if (this.delivery !== "system") return;
    // Delivery "system" builds its block at every step: the compaction is handled here and now.
    session.rebuild = undefined;
    session.present = undefined;
    session.compactions.handled = Math.max(session.compactions.seen, session.compactions.evented);
  }

  /**
   * After a tool ran: OpenCode's own reminder copy of a file the conversation already holds whole
   * is removed, and (stable delivery) the files this call reached, or that changed since the
   * conversation got them, are appended to its output.
   */
  async afterTool(sessionID: string, tool: unknown, callID: unknown, args: unknown, result: ToolResult): Promise<void> {
    if (this.disposed || typeof result?.output !== "string") return;
    const session = this.sessions.get(sessionID);
    // Known by its call's id (empty, or reused by providers that number calls per response: what a
    // prune took is then judged file by file, see observe). "system" is the plugin's own block.
    const carrier = typeof callID === "string" && callID !== SYSTEM_CARRIER ? callID : undefined;
    if (carrier !== undefined) session.called(carrier);
    // An unload's output is what tells the model to disregard a file the frozen block still shows.
    if (tool === "project_context" && carrier !== undefined) {
      // Only what this call unloaded: a parallel call's notice rides on that call's own output.
      const arg = (args as { path?: unknown } | undefined)?.path;
      const pending = session.unloadedByTool;
      for (let i = 0; i < pending.length; ) {
        const { path, note, arg: given } = pending[i]!;
        if (given === arg) {
          session.noted(carrier, path, note);
          pending.splice(i, 1);
        } else i++;
      }
    }
    // The tool's own writes are saved by now: what is read after this moment has them.
    const since = performance.now();
    const loaded = tool === "read" ? strings((result.metadata as { loaded?: unknown } | undefined)?.loaded) : [];
    // Delivery "system" only judges read reminders here; the next request's block does the rest.
    if (this.delivery !== "stable" && loaded.length === 0) return;
    await session.serially(async () => {
      await this.restore(session);
      const hierarchy = await this.fresh(session, false, since);
      if (loaded.length > 0) this.judgeReminder(session, hierarchy, carrier, loaded, result);
      if (this.delivery !== "stable" || carrier === undefined) return;
      const reached = new Set(toolPaths(tool, args, this.settings.directory, this.settings.worktree).map((touch) => touch.path));
      const text = await this.deliver(session, hierarchy, carrier, reached);
      if (text === "") return;
      result.output = `${result.output as string}\n\n${text}`;
      session.delivered(carrier, text);
    });
  }

  /** A user message (stable delivery): what changed since the conversation got it rides along as a text part. */
  async userMessage(sessionID: string, messageID: string, agent?: string, text = ""): Promise<string> {
    if (this.disposed) return "";
    const session = this.sessions.get(sessionID);
    session.messageID = messageID;
    if (agent !== undefined) session.agent = agent;
    // Before the catalog is built, the message is ranked when it is (at the session's next step).
    if (this.catalogBuilding) {
      // A few at most: the catalog is built within seconds, and older messages matter least.
      if (session.unranked.length >= MAX_UNRANKED) session.unranked.shift();
      session.unranked.push(text);
    } else this.attach(session, text);
    if (this.delivery !== "stable") return "";
    return session.serially(async () => {
      await this.restore(session);
      // A user message starts a step of its own.
      session.stepTokensLeft = this.settings.options.deliveryTokens;
      return this.deliver(session, await this.fresh(session), messageID, new Set());
    });
  }

  /**
   * `include: agent` files the message is about (ranked against their description, headings and
   * text) join the session, once: delivered with this message (stable) or in the next block.
   */
  private attach(session: Session, text: string): void {
    const { agentThreshold, agentTop } = this.settings.options;
    if (this.catalog === undefined || text.trim() === "" || agentTop === 0) return;
    // A file not for this agent cannot load: it takes none of the message's agentTop places.
    const forAgent = this.catalog.rank(text, agentThreshold, Infinity).filter((ranked) => appliesToAgent(ranked.entry.contract, session.agent ?? "build"));
    for (const ranked of forAgent.slice(0, agentTop)) {
      // The rules' key counts attached files: what the session is made of changed.
      if (!session.attached.has(ranked.key)) session.attached.set(ranked.key, ranked.score);
    }
  }

  /** OpenCode's messages as about to be sent: a pruned tool output that carried a file sends it back to the system block. */
  observe(messages: unknown): void {
    if (this.disposed) return;
    const scanned = scanMessages(messages, (sessionID, callID) => this.sessions.peek(sessionID)?.carries(callID) === true);
    for (const [sessionID, { summary, kept, pruned, lastIndex, lastId, idAt, ids }] of scanned) {
      const session = this.sessions.peek(sessionID);
      if (session === undefined) continue;
      // The first messages after the compacting hook are the compaction agent's: the turns it summarizes, without those it keeps.
      if (session.compacting) {
        session.compacting = false;
        continue;
      }
      const compacted = summary !== undefined && summary !== session.compactions.lastSummary;
      // The latest message of the last request is gone, with no compaction: turns were undone (OpenCode's
      // /undo removes them). What their outputs and messages carried is sent again when reached.
      const seen = session.lastMessage;
      session.lastMessage = { index: lastIndex, id: lastId };
      if (!compacted && seen !== undefined && idAt(seen.index) !== seen.id) {
        const present = ids();
        const { outputs } = kept();
        for (const carrier of [...session.carriers()]) {
          if (!present.has(carrier)) {
            for (const path of session.vanished(carrier, (other) => other === SYSTEM_CARRIER || present.has(other))) session.returning.add(path);
            continue;
          }
          // An id that names several outputs (a provider that numbers calls per response): what no
          // output of it left still shows went with the undone turn. An id of its own is its output.
          const left = outputs.get(carrier);
          if (left === undefined || !session.reusesIds) continue;
          // A section shows a file; one only named is shown by its path in a list of names.
          const shows = this.showing(session, carrier, left);
          session.forgetUnshown(carrier, (path) => (session.known(path)?.held === "named" ? left.some(({ text }) => text.includes(this.shownRel(path))) : shows(path)));
        }
      }
      // OpenCode sends the messages from a summary on: the counts of an id's parts start again.
      if (compacted) session.prunesJudged.clear();
      // One id may name several parts: a file another part of its id still shows stays where it is.
      // Judged again only when that id's parts changed (a pruned part stays in the conversation).
      for (const [carrier, { parts, kept: outputs }] of pruned) {
        if (session.prunesJudged.get(carrier) === parts) continue;
        for (const path of session.pruned(carrier, this.showing(session, carrier, outputs))) session.returning.add(path);
        if (session.carries(carrier)) session.prunesJudged.set(carrier, parts);
        else session.prunesJudged.delete(carrier);
      }
      if (!compacted) continue;
      session.compactions.lastSummary = summary;
      // Every compaction started so far is over (the main loop goes on after it): this summary covers
      // them all, their events included, late ones too.
      session.compactions.seen = Math.max(session.compactions.seen + 1, session.compactions.hooked);
      const { messages: userMessages, outputs } = kept();
      const showing = new Map<string, (path: string) => boolean>();
      session.present = (carrier, path) => {
        if (userMessages.has(carrier)) return true;
        let shows = showing.get(carrier);
        if (shows === undefined) showing.set(carrier, (shows = this.showing(session, carrier, outputs.get(carrier))));
        return shows(path);
      };
      if (session.compactions.seen > session.compactions.handled) this.askRebuild(session);
    }
  }

  /** The compaction agent's request came (after the messages it summarizes): the next messages are the main loop's. */
  compactionRequested(sessionID: string): void {
    const session = this.sessions.peek(sessionID);
    if (session !== undefined) session.compacting = false;
  }

  /** The session was compacted: its next step gets its whole hierarchy in the system block. */
  compacted(sessionID: string): void {
    const session = this.sessions.peek(sessionID);
    if (session === undefined) return;
    session.compacting = false;
    session.compactions.evented++;
    if (session.compactions.evented > session.compactions.handled) this.askRebuild(session);
  }

  private askRebuild(session: Session): void {
    session.rebuild = "compacted";
    session.returning.clear();
  }

  /** The closest-first copy for the compaction summarizer, within `compactionTokens`. */
  async compactionCopy(sessionID: string): Promise<string> {
    if (this.disposed) return "";
    const session = this.sessions.get(sessionID);
    // The compaction's own request follows, with the messages it summarizes only: no prune is judged on them.
    session.compacting = true;
    session.compactions.hooked++;
    await this.restore(session);
    const hierarchy = await this.fresh(session, true);
    return (await this.compose("compaction", this.items(session, hierarchy, () => true), this.settings.options.compactionTokens)).text;
  }

  /** What a session's next step is made of: for `explain` and tests. */
  async inspect(sessionID: string): Promise<{ hierarchy: Ruled; system: Composed; compaction: Composed; catalog: readonly { rel: string; include: string; description?: string }[] }> {
    const session = this.sessions.get(sessionID);
    // What applies, the worktree's always and agent files included: explain waits for the catalog.
    await this.catalogBuilt();
    await this.restore(session);
    const hierarchy = await this.fresh(session);
    const all = this.items(session, hierarchy, () => true);
    return {
      hierarchy,
      system: await this.compose("system", all, this.settings.options.systemTokens),
      compaction: await this.compose("compaction", all, this.settings.options.compactionTokens),
      catalog: [...(this.catalog?.all ?? [])].map((entry) => ({ rel: entry.file.rel, include: entry.contract.include, ...(entry.contract.description === undefined ? {} : { description: entry.contract.description }) })),
    };
  }

  /**
   * The project_context tool. `list`: what the session has of each context file and why; `load`:
   * pins a directory (its chain) or a context file to the session; `unload`: takes a file out until a
   * tool call touches its directory; `update`: replaces or adds one section of a context file. The
   * answer is one text the model can act on, an error included.
   */
  async contextTool(sessionID: string, args: ContextToolArgs, ask?: ContextToolAsk): Promise<string> {
    if (this.disposed) return "project_context: the plugin is shutting down";
    const session = this.sessions.get(sessionID);
    // After the catalog: `list` names the worktree's manual and agent files, `load` may pin one.
    await this.catalogBuilt();
    await this.restore(session);
    if (args.action === "list") return this.list(session);
    const target = this.resolveTarget(args.path);
    if (typeof target === "string") return `project_context ${args.action}: ${target}`;
    if (args.action === "load") return this.load(session, target);
    if (args.action === "unload") return this.unload(session, target, args.path);
    return this.update(target, args.section, args.content, ask);
  }

  private async list(session: Session): Promise<string> {
    const hierarchy = await this.fresh(session, true);
    const files = snapshotFiles(session, hierarchy, this.store.realRoot).map((snapshot) => describe(snapshot, this.delivery));
    // Every name, reason and description is repository content: shown on one line, escaped.
    const lines = files.map((file) => `- ${escapePath(file.path)}: ${file.level}, ${file.mode}${file.score === undefined ? "" : ` (score ${file.score})`}, ${file.total} tokens; ${escapeInline(stateText(file))}`);
    for (const [path, why] of hierarchy.excluded) lines.push(`- ${this.shownRel(path)}: not loaded: ${escapeInline(why)}`);
    for (const entry of this.catalog?.all ?? []) {
      if (hierarchy.byPath.has(entry.file.path) || hierarchy.excluded.has(entry.file.path)) continue;
      const how = entry.contract.include === "agent" ? "offered when a user message is about it" : "load it with this tool";
      lines.push(`- ${escapePath(entry.file.rel)}: ${entry.contract.include}, not loaded (${how})${entry.contract.description === undefined ? "" : `: ${escapeInline(entry.contract.description)}`}`);
    }
    const pins = [...session.pins.values()].map((pin) => this.shownRel(pin.path));
    return [
      `Context files of this session (worktree-relative; most important first; delivery ${this.delivery}):`,
      ...(lines.length === 0 ? ["(none)"] : lines),
      `Pinned: ${pins.length === 0 ? "(nothing)" : pins.join(", ")}`,
    ].join("\n");
  }

  private load(session: Session, target: Target): string {
    const rel = this.shownRel(target.real);
    if (!this.pinTarget(session, target)) {
      return `project_context load: ${rel} is not a context file (${this.settings.options.fileNames.join(", ")}); load its directory to pin that directory's chain`;
    }
    const what = target.isFile ? rel : `the context files from ${rel} up to the worktree root`;
    return `project_context load: pinned ${what} to this session; ${this.delivery === "stable" ? "new text follows below, or arrives with the next tool output" : "in the context from the next step"}.`;
  }

  private async unload(session: Session, target: Target, arg: string): Promise<string> {
    const rel = this.shownRel(target.real);
    const { unpinned, files, held } = this.unloadTarget(session, target, await this.fresh(session, true));
    const pin = unpinned ? { path: target.path, isFile: target.isFile } : undefined;
    // A call whose after hook never came (aborted) leaves its entries: the oldest go past a bound.
    files.forEach((each, i) => session.unloadedByTool.push({ path: each.path, note: { unloaded: true, pin, held: held[i] }, arg }));
    if (session.unloadedByTool.length > MAX_UNCLAIMED_UNLOADS) session.unloadedByTool.splice(0, session.unloadedByTool.length - MAX_UNCLAIMED_UNLOADS);
    const [file] = files;
    if (file === undefined) {
      return unpinned ? `project_context unload: unpinned ${rel}.` : `project_context unload: ${rel} is not in this session's context (see the list action)`;
    }
    const where = this.relOf(file.dir) === "" ? "the worktree root" : this.shownRel(file.dir);
    const names = files.map((each) => escapePath(each.rel)).join(" and ");
    return files.length === 1
      ? `project_context unload: ${names} is out of this session's context: disregard its instructions from now on. It comes back when a tool call touches ${where} or it is loaded again.`
      : `project_context unload: ${names} are out of this session's context: disregard their instructions from now on. They come back when a tool call touches ${where} or they are loaded again.`;
  }

  /**
   * A load (the tool's, or one replayed from history or asked by the TUI): pins the target and brings
   * back what it had unloaded. False when a file that is not a context file is named.
   */
  private pinTarget(session: Session, target: Target): boolean {
    if (target.isFile && !this.isContextFile(target.real)) return false;
    session.pin({ path: target.path, isFile: target.isFile });
    for (const [file, dir] of session.unloaded) if (file === target.real || (!target.isFile && dir === target.real)) session.reloadFile(file);
    return true;
  }

  /**
   * An unload (the tool's, one replayed from history, or the TUI's unpin): unpins the target and takes
   * its file out of the context when `hierarchy` (the session's, pins included) holds it, even when
   * the pin alone brought it: the model still holds its text, and must be told to disregard it.
   */
  private unloadTarget(session: Session, target: Target, hierarchy: Ruled | undefined): { unpinned: boolean; files: readonly FileVersion[]; held: readonly (Known | undefined)[] } {
    const unpinned = session.unpin(target.path);
    const file = target.isFile ? hierarchy?.byPath.get(target.real) : undefined;
    // A directory's context is each of its files (its own, its local variant, rule files), in the block's order.
    const files = target.isFile ? (file === undefined ? [] : [file]) : (hierarchy?.files.filter((each) => each.dir === target.real) ?? []);
    const held = files.map((each) => session.unload(each.path, each.dir));
    return { unpinned, files, held };
  }

  private async update(target: Target, section: string, content: string, ask: ContextToolAsk | undefined): Promise<string> {
    const rel = this.shownRel(target.real);
    if (!target.isFile || !this.isContextFile(target.real)) return `project_context update: ${rel} is not a context file (${this.settings.options.fileNames.join(", ")})`;
    const { maxFileBytes } = this.settings.options;
    const read = readContained(target.real, dirname(target.real), this.store.realRoot, maxFileBytes, { transient: true });
    if (read.kind !== "file") return `project_context update: ${rel} cannot be read${read.kind === "skip" ? ` (${escapeInline(read.skip.reason)})` : ""}`;
    const spliced = spliceSection(read.version.raw, section, content);
    if ("error" in spliced) return `project_context update: ${escapeInline(spliced.error)}`;
    // An edit like any other: OpenCode's permission for editing this file (the plan agent, "edit": "ask") decides.
    if (ask !== undefined) {
      const pattern = this.relOf(target.real);
      try {
        await ask({ permission: "edit", patterns: [pattern], always: [pattern], metadata: { filepath: target.real } });
      } catch (error) {
        return `project_context update: editing ${rel} is not permitted (${escapeInline(error instanceof Error ? error.message : String(error))})`;
      }
    }
    const refused = replaceFile(target.real, this.store.realRoot, maxFileBytes, read.version.sha256, spliced.text);
    if (refused !== undefined) return `project_context update: ${escapeInline(refused)}`;
    return `project_context update: ${spliced.replaced ? "replaced" : "added"} the section "${escapeInline(section.trim())}" of ${rel}; the new text is in the context from the next step.`;
  }

  /** A tool's path (worktree-relative or absolute), settled inside the real worktree; a string says why not. */
  private resolveTarget(raw: string): Target | string {
    const given = raw.trim();
    if (given === "" || given.includes("\0") || given.length > 4096) return "path must name a file or directory of the worktree (worktree-relative or absolute)";
    const path = isAbsolute(given) ? resolve(given) : resolve(this.settings.worktree, given);
    const shown = escapeInline(given.slice(0, 512));
    if (!isInside(path, this.settings.worktree)) return `${shown} is outside the worktree`;
    try {
      const real = realpathSync.native(path);
      if (!isInside(real, this.store.realRoot)) return `${shown} leads outside the worktree`;
      return { path, real, isFile: !statSync(real).isDirectory() };
    } catch {
      return `${shown} does not exist`;
    }
  }

  /** A context file by name (or one of its variants), or a rule file the worktree catalog knows. */
  private isContextFile(real: string): boolean {
    return this.store.isCandidateName(basename(real)) || this.catalog?.get(real) !== undefined;
  }

  /** The `pin` option: every session starts with these. */
  private pinDefaults(session: Session): void {
    for (const raw of this.settings.options.pin) {
      const target = this.resolveTarget(raw);
      if (typeof target === "string") this.settings.log.once(`pin:${raw}`, "warn", `option "pin": ${target}; ignored`);
      // Before the catalog is built a rule file is not known yet: pinned as given (a path of no context file loads nothing).
      else if (this.catalog === undefined) session.pin({ path: target.path, isFile: target.isFile });
      else if (!this.pinTarget(session, target)) this.settings.log.once(`pin:${raw}`, "warn", `option "pin": ${this.shownRel(target.real)} is not a context file (${this.settings.options.fileNames.join(", ")}); ignored`);
    }
  }

  /** Applies what a TUI asked of the session since the last step (records on: the file lives next to them). */
  private steer(session: Session): void {
    if (this.records === undefined || !isSessionId(session.id)) return;
    const path = steerPath(this.records.dir, session.id);
    let complete: string;
    try {
      // A steering file made again (its directory cleared, say), or cut shorter, is read from its start.
      const appliedOf = (size: number, file: string) => (file === session.steer.file && size >= session.steer.offset ? session.steer.offset : 0);
      const read = readFrom(path, (size, file) => Math.max(size - MAX_STEER_READ, appliedOf(size, file)));
      if (read === undefined || read.bytes.length === 0) return;
      // Only whole lines: a line being written is applied at the next step.
      const end = read.bytes.lastIndexOf(0x0a) + 1;
      complete = read.bytes.subarray(0, end).toString("utf8");
      session.steer = { file: read.file, offset: read.from + end };
    } catch (error) {
      this.settings.log.once(`steer:${session.id}:${String(error)}`, "warn", `could not read the TUI's requests for session ${session.id}: ${String(error)}`);
      return;
    }
    for (const request of parseSteer(complete)) {
      const target = this.resolveTarget(request.path);
      if (typeof target === "string") {
        this.settings.log.once(`steer:${session.id}:${request.path}`, "warn", `a TUI asked to ${request.action} ${request.path} in session ${session.id}: ${target}`);
      } else if (request.action === "load") {
        this.pinTarget(session, target);
      } else {
        const { files } = this.unloadTarget(session, target, this.current(session));
        session.userUnloaded(target.path, target.real);
        // The model learns it as from the tool: a frozen system block may still hold the text.
        for (const file of files) {
          const notice = unloadNotice(file.rel);
          session.notify(notice, `unload:${file.path}`);
          // Its carrier, once a delivery tells it, is one of a note: pruned, the block is built again without the file.
          if (session.system?.paths.has(file.path) === true) session.noticeFiles.set(notice, file.path);
        }
      }
    }
  }

  /**
   * Queues this step's record: which files the request has and how. Only references are taken now;
   * the line is made and written in a later task, and a step that changed nothing reuses the last list.
   */
  private record(session: Session): void {
    const records = this.records;
    const hierarchy = this.current(session);
    if (records === undefined || hierarchy === undefined || !isSessionId(session.id)) return;
    const header = {
      v: RECORDS_VERSION,
      time: new Date().toISOString(),
      session: session.id,
      message: session.messageID ?? null,
      agent: session.agent ?? null,
      delivery: this.delivery,
      worktree: this.store.realRoot,
      pins: [...session.pins.values()].map((pin) => this.relOf(pin.path) || "."),
    };
    // The files' part is made again only when some file's version, state or mode changed: a step
    // that changed none (the common case) reuses the last one. When nothing a snapshot is made of
    // changed (the same objects, the same held revision), not even a snapshot is taken: this runs at
    // every request, and a hierarchy may hold thousands of files.
    const sources = [hierarchy.files, hierarchy.modes, hierarchy.manual, hierarchy.closest, session.systemEntries, session.hostPaths, session.heldRevision];
    const memo = session.recordMemo;
    const unchanged = memo !== undefined && sources.every((source, i) => source === memo.sources[i]);
    const snapshot = unchanged ? memo.snapshot : snapshotFiles(session, hierarchy, this.store.realRoot);
    const delivery = this.delivery;
    records.append(session.id, () => {
      const last = session.recordMemo;
      // Exact counts that arrived since (a compaction copy, an explain) change the tokens the entries show.
      const counts = countsRevision();
      const files = last !== undefined && last.counts === counts && (last.snapshot === snapshot || sameSnapshot(last.snapshot, snapshot)) ? last.files : snapshot.map((file) => describeJson(file, delivery, session.recordEntries));
      session.recordMemo = { sources, snapshot, counts, files };
      return { open: `${recordJson(header).slice(0, -1)},"files":[`, items: files, close: "]}" };
    });
  }

  /** A deleted session: its state, and its records and steering file (a session deleted is gone for explain too). */
  forget(sessionID: string): void {
    this.sessions.delete(sessionID);
    if (isSessionId(sessionID)) this.records?.forget(sessionID);
  }

  async dispose(): Promise<void> {
    this.disposed = true;
    this.wakeQuiet?.();
    // The store first: it closes every watch in one pass, and the sessions' releases then find nothing to let go of.
    this.store.dispose();
    this.sessions.clear();
    this.catalog?.dispose();
    await Promise.all([disposeTokens(), this.records?.close()]);
    // After the last records are written (a record's line may ask for a doc).
    clearDocs();
  }

  /**
   * The session's hierarchy after a freshness check of everything it was read from: every change
   * written before this call is in it.
   */
  private async fresh(session: Session, ordered = false, since = performance.now()): Promise<Ruled> {
    await this.readyToRead();
    let hierarchy: Hierarchy;
    for (;;) {
      // First: the catalog's refresh gives the loop turns, and no turn may come between the hierarchy and its rules.
      const building = this.catalogBuilding;
      if (!building) await this.catalog?.refresh(since);
      hierarchy = await this.raw(session, ordered, since);
      // A step does not wait for the catalog (git's listing of the worktree and a read of each context
      // file's head), except to inline imports (which must know what git ignores everywhere) or follow
      // watch globs (which match the listing): its always and agent files join when it is built.
      if (this.catalogBuilding && hierarchy.files.some(needsIndex)) await this.catalogBuilt();
      // Built while this step waited or read: refreshed (what changed since it read a file), then the hierarchy again.
      else if (!building || this.catalogBuilding) break;
    }
    if (!this.catalogBuilding && session.unranked.length > 0) for (const text of session.unranked.splice(0)) this.attach(session, text);
    const ruled = this.rule(session, hierarchy);
    this.checkWatches(session, ruled, since);
    return ruled;
  }

  /**
   * `watch:` in a loaded file's frontmatter: a watched file created, changed or deleted since the
   * session last looked gives one notice naming both files, at the session's next delivery. Watched
   * files are the index's context files and the globs' plain paths, checked by stat whenever the
   * session's hierarchy is brought up to date (a tool call, a message, a block; only sessions with a
   * watching file pay for it); a file loaded later starts from what is there then, with no old notices.
   */
  private checkWatches(session: Session, ruled: Ruled, since: number): void {
    if (ruled.watchers.length === 0 && session.watched.size === 0) return;
    // A check of the same watching files that began after `since` has every change saved before it:
    // the parallel calls of a step stat the targets once (a hunt: 5 watching files, 4 calls a step,
    // 13.9 ms a step).
    if (session.watchesChecked !== undefined && session.watchesChecked.at >= since && session.watchesChecked.watchers === ruled.watchers) return;
    session.watchesChecked = { at: performance.now(), watchers: ruled.watchers };
    const watching = new Set<string>();
    for (const file of ruled.watchers) {
      const contract = readContract(file.frontmatter);
      watching.add(file.path);
      const before = session.watched.get(file.path);
      const now = new Map<string, string>();
      const { targets, capped } = this.watchTargets(contract);
      if (capped === "targets") {
        const message = `${file.rel}: its watch globs match more than ${MAX_WATCH_TARGETS} files; only the first ${MAX_WATCH_TARGETS} (in the worktree index's order) are watched`;
        this.settings.log.once(`watch-cap:${file.sha256}`, "warn", message);
      } else if (capped === "work") {
        const message = `${file.rel}: matching its watch globs against the worktree's files took too long (more than ${MAX_WATCH_WORK} steps); only the files matched before that are watched`;
        this.settings.log.once(`watch-work:${file.sha256}`, "warn", message);
      }
      for (const rel of targets) now.set(rel, this.watchPrint(file.rel, rel, before?.get(rel)));
      session.watched.set(file.path, now);
      if (before === undefined) continue;
      const notify = (rel: string, change: WatchChange) => session.notify(watchNotice(file.rel, rel, change), `watch:${file.path}\0${rel}`);
      for (const [rel, print] of now) {
        // A target the glob did not name before (the watcher's own edit) is news of the watcher, not of the target.
        const was = before.get(rel);
        if (was === undefined || was === print) continue;
        notify(rel, was === "-" ? "created" : print === "-" ? "deleted" : "changed");
      }
      // A file that left the list is news only when it is gone: the watcher's globs edited, or a
      // match cut short (a cap, its matching budget), drop files that are still there.
      for (const [rel, was] of before) {
        if (!now.has(rel) && was !== "-" && this.watchPrint(file.rel, rel, was) === "-") notify(rel, "deleted");
      }
    }
    for (const path of session.watched.keys()) if (!watching.has(path)) session.watched.delete(path);
  }

  /** What stat says of a watch target; one that resolves outside the worktree is absent ("-"): nothing outside is observed. */
  private watchPrint(watcher: string, rel: string, known: string | undefined): string {
    const print = containedPrint(join(this.store.realRoot, rel), this.store.realRoot, known);
    if (print !== undefined) return print;
    this.settings.log.once(`watch-outside:${rel}`, "warn", `${watcher}: its watch target ${rel} leads outside the worktree; it counts as absent`);
    return "-";
  }

  /** The worktree-relative files a contract's `watch` globs name: context files of the index that match, and plain paths. */
  private watchTargets(contract: Contract): { targets: readonly string[]; capped: "targets" | "work" | undefined } {
    const files = this.catalog?.index?.files;
    const known = this.targets.get(contract);
    if (known !== undefined && known.files === files) return known;
    // Each watching file its own budget: one file's globs never cut another's short.
    const work: MatchWork = { left: MAX_WATCH_WORK };
    const targets = new Set<string>();
    let capped: "targets" | "work" | undefined;
    for (const glob of contract.watch) if (!/[*?[\]{}!\\]/.test(glob)) targets.add(glob.replace(/^\.\//, ""));
    for (const rel of files ?? []) {
      const matched = matchesWatch(contract, rel, work);
      if (work.left < 0) {
        capped = "work";
        break;
      }
      if (!matched || targets.has(rel)) continue;
      if (targets.size >= MAX_WATCH_TARGETS) {
        capped = "targets";
        break;
      }
      targets.add(rel);
    }
    const memo = { files, targets: [...targets].sort(), capped };
    this.targets.set(contract, memo);
    return memo;
  }

  private async raw(session: Session, ordered: boolean, since: number): Promise<Hierarchy> {
    this.reading++;
    this.lastRead = performance.now();
    try {
      return await this.readHierarchy(session, ordered, since);
    } finally {
      this.lastRead = performance.now();
      if (--this.reading === 0) for (const wake of this.idleWaiters.splice(0)) wake();
    }
  }

  /** Waits for the catalog (never from inside `reading`: it gives way to reading steps), starting it now if it waits for a quiet moment. */
  private async catalogBuilt(): Promise<void> {
    // Built (or never started): nothing to wait for, not even a turn of the loop (every tool call and explain asks).
    if (this.catalogReady === undefined || !this.catalogBuilding) return;
    this.catalogWanted = true;
    this.wakeQuiet?.();
    await this.catalogReady;
    // Not in the task that finished the catalog: the step's own work runs in a task of its own.
    await nextTurn();
  }

  private async readHierarchy(session: Session, ordered: boolean, since: number): Promise<Hierarchy> {
    // Reused or computed, the hierarchy is checked against disk; a change found means computing again
    // (three rounds at most: a directory rewritten faster than it can be read is served as last read).
    // Touching a known path again only changes priorities: a block that is about to be built asks
    // for them (`ordered`); finding what to deliver does not.
    // The freshness barrier starts first: its watcher hop runs while a new chain is read.
    this.store.prepare(since);
    for (let round = 0; ; round++) {
      // Taken before the hierarchy is computed: a change installed while it is (a settle of another
      // session's call, a re-read in a slice) makes it stale even though it came before the settle below.
      const generation = this.store.generation;
      const memo = this.hierarchies.get(session);
      const order = ordered || memo === undefined ? session.order : memo.order;
      const key = `${generation}:${session.version}:${order}`;
      let hierarchy = memo?.key === key ? memo.hierarchy : undefined;
      // Paths added or forgotten that start where the hierarchy already starts change no file (a long
      // session forgets its oldest path at each new one once it holds maxTouchedDirs).
      if (hierarchy === undefined && memo !== undefined && memo.base === `${this.store.generation}:${session.pinRevision}:${order}`) {
        const forgotten = memo.evictions === session.evictions ? undefined : { sessionDir: { path: this.settings.directory, isFile: false }, pins: session.pins.values() };
        hierarchy = extendHierarchy(this.store, memo.hierarchy, session.touched.values(), forgotten);
        if (hierarchy !== undefined) this.hierarchies.set(session, { ...memo, key, evictions: session.evictions, hierarchy });
      }
      if (hierarchy === undefined) {
        // The last hierarchy, when it holds a subset of these touches (none forgotten since) and the same pins as of this generation, lends what it learned.
        const lender = memo !== undefined && memo.evictions === session.evictions && memo.base.startsWith(`${generation}:${session.pinRevision}:`) ? memo.hierarchy : undefined;
        // Deleted while this is computed: its watches were let go already, and must stay so.
        const hold = (dirs: Iterable<string>) => this.sessions.peek(session.id) === session && this.store.retain(session.id, dirs);
        // The walks of the last hierarchy's starts are held already (its dirSet was): not again.
        const heldStarts = memo?.hierarchy.startDirs;
        const holdWalk = (dirs: Iterable<string>, start: string) => heldStarts?.has(start) === true || hold(dirs);
        // The new walks are held before they are read (watched first: no check owed after), then all of its directories.
        // What the hierarchy is computed from, taken before it is: a pin, touch or eviction made while it
        // is computed (its slices, a chain's read) must not pass for one it holds.
        const base = `${generation}:${session.pinRevision}:${session.order}`;
        const { evictions, order: computedOrder } = session;
        hierarchy = await hierarchyOf(this.store, this.settings.directory, [...session.touched.values()], [...session.pins.values()], lender, holdWalk);
        this.hierarchies.set(session, { key, base, evictions, order: computedOrder, hierarchy });
        hold(hierarchy.dirSet);
      }
      await this.store.settle(hierarchy.dirSet, since);
      if (this.store.generation === generation || round === 2) {
        const starts = hierarchy.starts;
        session.reload((touch) => starts.get(touch.path));
        return hierarchy;
      }
    }
  }

  /** The last hierarchy computed for the session, without a freshness check (judging the host's prompt between builds). */
  private current(session: Session): Ruled | undefined {
    return this.ruled.get(session)?.ruled;
  }

  /**
   * The hierarchy after the rules contract: the worktree's always files, the agent files attached to
   * the session and its pinned rule files join it, then each file's frontmatter decides (see
   * rules/apply.ts). Computed again only when something it depends on changed.
   */
  private rule(session: Session, hierarchy: Hierarchy): Ruled {
    const catalog = this.catalog;
    const agent = session.agent ?? "build";
    const memo = this.ruled.get(session);
    // What the rules decide from besides the files; `matched` grows as the rules apply, so it is read after.
    const keyOf = () => `${catalog?.version}:${agent}:${session.matched.size}:${session.attached.size}:${session.pinRevision}`;
    const base = keyOf();
    // Imported files are checked by stat: an edit of one makes the rules apply again.
    if (memo !== undefined && memo.key === `${base}:${printOf(memo.ruled.imports)}`) {
      // No path new to the session (nor a directory's path now read as a file): the same decisions.
      if (memo.hierarchy === hierarchy && memo.version === session.version) return memo.ruled;
      // The same files with other touched paths (the common step): the rules decide the same unless a
      // new touched file matches a file waiting for its `paths:`. A 2,000-file hierarchy is not ruled again.
      if (memo.hierarchy.files === hierarchy.files && !this.matchesWaiting(memo.ruled, memo.checked, hierarchy, session)) {
        const ruled: Ruled = memo.hierarchy === hierarchy ? memo.ruled : { ...memo.ruled, starts: hierarchy.starts };
        this.ruled.set(session, { ...memo, hierarchy, ruled, version: session.version });
        return ruled;
      }
    }
    const realOf = (path: string) => this.realOfTouch(hierarchy, path);
    const pinnedFiles = new Set<string>();
    const pinnedDirs = new Set<string>();
    for (const pin of session.pins.values()) {
      const real = pin.isFile ? realOf(pin.path) : hierarchy.starts.get(pin.path);
      if (real !== undefined) (pin.isFile ? pinnedFiles : pinnedDirs).add(real);
    }
    const extras: FileVersion[] = [];
    const always = new Set<string>();
    const ruleFiles = new Set<string>();
    for (const entry of catalog?.all ?? []) {
      const path = entry.file.path;
      if (entry.rule) ruleFiles.add(path);
      if (entry.contract.include === "always") always.add(path);
      if (entry.contract.include === "always" || session.attached.has(path) || pinnedFiles.has(path)) extras.push(entry.file);
    }
    const touchedFiles: string[] = [];
    const checked = new Set<string>();
    for (const touch of session.touched.values()) {
      if (!touch.isFile) continue;
      const real = realOf(touch.path);
      // A touch this hierarchy has no start for (it came in while the hierarchy was read) is checked by a later one.
      if (real === undefined) continue;
      checked.add(touch.path);
      touchedFiles.push(real);
    }
    const ruled = applyRules(withExtras(hierarchy, extras), {
      agent,
      touchedFiles,
      matched: session.matched,
      pinnedFiles,
      pinnedDirs,
      always,
      ruleFiles,
      attached: session.attached,
      read: this.importRead,
      worktree: this.store.realRoot,
      replaces: this.replaces,
      warn: (file, message) => this.settings.log.once(`import:${file.sha256}:${message}`, "warn", message),
      screened: memo?.ruled.screened,
    });
    for (const files of [hierarchy.files, extras]) {
      for (const file of files) {
        for (const problem of readContract(file.frontmatter).problems) {
          this.settings.log.once(`contract:${file.sha256}:${problem.key}`, "warn", describeProblem(file.rel, problem));
        }
      }
    }
    this.ruled.set(session, { key: `${keyOf()}:${printOf(ruled.imports)}`, hierarchy, ruled, checked, version: session.version });
    return ruled;
  }

  /** The real path of a touched (or pinned) file: where its walk starts, and its name. */
  private realOfTouch(hierarchy: Hierarchy, path: string): string | undefined {
    const start = hierarchy.starts.get(path);
    if (start === undefined) return undefined;
    const known = this.realPaths.get(path);
    if (known?.start === start) return known.real;
    // A file in directories not created yet starts its walk at an existing ancestor: its path below it is kept.
    const lexical = join(this.store.realRoot, relative(this.settings.worktree, path));
    const joined = isInside(lexical, start) ? lexical : join(start, basename(path));
    // The touched path's own string when they read the same (no symlink on the way): one copy, not two.
    const real = joined === path ? path : joined;
    if (this.realPaths.size >= MAX_REAL_PATHS) this.realPaths.clear();
    this.realPaths.set(path, { start, real });
    return real;
  }

  /** Whether a touched file not `checked` yet matches the `paths:` of a file waiting for one (those that do not are checked now). */
  private matchesWaiting(ruled: Ruled, checked: Set<string>, hierarchy: Hierarchy, session: Session): boolean {
    if (ruled.awaiting.size === 0) return false;
    // Forgotten paths stay in `checked`: past this the rules apply again, and it starts over.
    if (checked.size > 2 * this.settings.options.maxTouchedDirs) return true;
    for (const touch of session.touched.values()) {
      if (!touch.isFile || checked.has(touch.path)) continue;
      const real = this.realOfTouch(hierarchy, touch.path);
      if (real === undefined) continue;
      if (!awaitedBy(ruled.awaiting, real, this.store.realRoot, session.matched).next().done) return true;
      checked.add(touch.path);
    }
    return false;
  }

  /**
   * An import's read: contained in the worktree at read time, its frontmatter stripped (never obeyed).
   * A committed file must not pull a developer's ignored secrets (.env, keys) or git's own files into
   * the prompt: the path as written and the file it leads to (a committed link to `.env`) are both
   * judged, and without the worktree index (which says what git ignores) nothing is imported.
   */
  private readonly importRead: ImportRead = (path) => {
    const index = this.catalog?.index;
    if (index === undefined) return { problem: "not imported: which files git ignores is not known (the worktree index is not built)" };
    const refused = (real: string) => {
      const rel = relativePosix(this.store.realRoot, real);
      return throughDotGit(rel) || index.isIgnored(rel);
    };
    if (refused(path)) return { problem: "git-ignored files (and .git) are not imported" };
    const outcome = readContained(path, dirname(path), this.store.realRoot, this.settings.options.maxFileBytes, { transient: true });
    if (outcome.kind !== "file") return outcome.kind === "skip" ? { problem: outcome.skip.reason, read: outcome.skip.read } : { problem: "no such file" };
    if (refused(outcome.version.path)) return { problem: "git-ignored files (and .git) are not imported", read: outcome.version.body.length };
    return { path: outcome.version.path, rel: outcome.version.rel, body: outcome.version.body, sha256: outcome.version.sha256 };
  };

  /**
   * The one name of instruction file OpenCode sends from the session's chain: the first of
   * HOST_LOADED_NAMES that exists in any directory from `sessionStart` up to the worktree (OpenCode
   * looks each name up the whole way, whatever maxDepth says, and stops at the first found; a name
   * the options leave out counts too). Looked up again when the host's prompt changes: OpenCode
   * re-reads its chain at every step, so a file made or gone there changes the prompt.
   */
  private hostLoadedName(sessionStart: string, prompt: string): string | undefined {
    if (this.hostName?.start === sessionStart && this.hostName.prompt === prompt) return this.hostName.name;
    const chain = walkUp(sessionStart, this.store.realRoot, Infinity);
    const name = HOST_LOADED_NAMES.find((candidate) => chain.some((dir) => existsSync(join(dir, candidate))));
    this.hostName = { start: sessionStart, prompt, name };
    return name;
  }

  /**
   * Which of the session's files the host's system prompt carries itself: an entry OpenCode
   * formatted for the file's path, followed by exactly the file's text. Judged again only when the
   * prompt's text changes.
   */
  private judgeHost(session: Session, prompt: string, hierarchy: Hierarchy | undefined): void {
    if (prompt === session.hostPrompt && hierarchy === undefined) return;
    session.hostPrompt = prompt;
    if (hierarchy === undefined) return;
    const sessionStart = hierarchy.starts.get(this.settings.directory);
    const sessionWalk = new Set(sessionStart === undefined ? [] : this.store.walkOf(sessionStart));
    const hostName = sessionStart === undefined ? undefined : this.hostLoadedName(sessionStart, prompt);
    const carried = new Set<string>();
    for (const named of hostEntryPaths(prompt)) {
      const file = this.fileNamed(hierarchy, named);
      // OpenCode's copy is the raw file: of one whose imports the rules inline, it lacks the imported text.
      if (file === undefined || (file.source !== undefined && hasImports(file.source))) continue;
      // OpenCode re-reads its own chain (session directory up to the worktree) every step, so a copy
      // of one of those may be newer than the store's; any other file must match to the byte. Only
      // for a file of the name OpenCode loads there: a marker line quoted in some file of the chain,
      // naming a local or override variant, or a CLAUDE.md where AGENTS.md files are what OpenCode
      // sends, must not make it count as sent.
      const byName = hostName !== undefined && basename(file.path) === hostName && sessionWalk.has(file.dir);
      if (byName || hostCarries(prompt, named, file.raw)) carried.add(file.path);
    }
    // The same files keep the same set: memos keyed on it (the record's) stay valid across steps.
    const before = session.hostPaths;
    if (sameMembers(carried, before)) return;
    session.hostPaths = carried;
    session.hostRevision++;
  }

  /**
   * A read's reminder: an entry for a file the conversation (or the block) already holds whole at
   * this version is removed; any other entry the read carries whole is what the conversation holds
   * of that file from now on.
   */
  private judgeReminder(session: Session, hierarchy: Ruled, carrier: string | undefined, loaded: readonly string[], result: ToolResult): void {
    const output = result.output as string;
    const drop = new Map<string, string>();
    const unruled = this.hierarchies.get(session)?.hierarchy;
    for (const named of loaded) {
      const file = this.fileNamed(hierarchy, named);
      if (file === undefined) {
        // A file the rules leave out (another agent's, overridden, manual, no match): OpenCode's copy goes too.
        const left = unruled === undefined ? undefined : this.fileNamed(unruled, named);
        if (left !== undefined && hierarchy.excluded.has(left.path) && reminderCarries(output, named, left.raw)) drop.set(named, left.raw);
        continue;
      }
      if (!reminderCarries(output, named, file.raw)) continue;
      // Delivery "system" never strips: the block leaves the file out while this read output carries
      // it (a block that later had to cut it would otherwise leave the model no whole copy at all).
      const known = session.known(file.path);
      const wholeAlready = this.delivery === "stable" && known?.sha256 === file.sha256 && known.held === "whole";
      // OpenCode copies the raw file: its frontmatter, and its imports not inlined. Stable delivery
      // replaces such a copy by the plugin's own, appended to this same output.
      const notAsRuled = this.delivery === "stable" && (file.source !== undefined || Object.keys(file.frontmatter).length > 0);
      if (wholeAlready || notAsRuled) drop.set(named, file.raw);
      // A file whose text the rules made (imports inlined, sections merged) is not what OpenCode's raw
      // copy holds: delivery "system" keeps its own copy in the block (the imported text is only there).
      else if (carrier !== undefined && file.source === undefined) session.hold(file.path, { sha256: file.sha256, held: "whole", carrier, dir: file.dir });
    }
    if (drop.size > 0) result.output = stripReminder(output, loaded, drop);
  }

  /**
   * What the conversation lacks, as a block for a tool output or a user message: files changed since
   * it got them, files it has never had (this call's first), deletions, and files known only by name
   * that this call reached. Within the step's delivery budget; what does not fit is named, and sent
   * by a later call that reaches its directory.
   */
  private async deliver(session: Session, hierarchy: Hierarchy, carrier: string, reached: ReadonlySet<string>): Promise<string> {
    // Until the system block is (re)built it takes everything current: nothing to deliver before it.
    if (session.system === undefined || session.rebuild !== undefined || session.returning.size > 0) return "";
    const reachedDirs = new Set<string>();
    for (const path of reached) {
      const start = hierarchy.starts.get(path);
      if (start !== undefined) for (const dir of this.store.walkOf(start)) reachedDirs.add(dir);
    }
    // Nothing changed since a diff found nothing to deliver: only a file known by name in a reached directory can be due.
    // What the rules were applied to and with (not the touch order, which only moves priorities), and what is taken out.
    const quietKey = `${this.store.generation}:${this.ruled.get(session)?.key}:${session.version}:${session.hostRevision}:${session.unloadRevision}:${session.vanishedRevision}`;
    // Any file of a reached directory may be the one known by name: its own, its local variant, a rule file.
    if (quietKey === session.quietKey && session.notices.length === 0 && ![...reachedDirs].some((dir) => session.namesIn(dir))) return "";
    if (session.stepTokensLeft < MIN_DELIVERY_TOKENS) return "";
    // Composed with no more budget than last time, from the same files and reaching the same
    // directories of files known by name, a block that only named again such files says nothing new (see below).
    const namedKey = () => `${quietKey}|${[...reachedDirs].filter((dir) => session.namesIn(dir)).sort().join("\0")}`;
    const namedOnly = session.namedOnly;
    if (namedOnly !== undefined && session.stepTokensLeft <= namedOnly.tokens && session.notices.length === 0 && namedOnly.key === namedKey()) return "";
    const updated: { file: FileVersion; tier: number }[] = [];
    const reachedNow: { file: FileVersion; tier: number }[] = [];
    const others: { file: FileVersion; tier: number }[] = [];
    // `priority: critical` files keep their tier here too: never cut, first (see budgetFor).
    const tierOf = (i: number, due: number) => (hierarchy.tiers[i] === CRITICAL_TIER ? CRITICAL_TIER : due);
    hierarchy.files.forEach((file, i) => {
      if (session.hostPaths.has(file.path) || session.unloaded.has(file.path)) return;
      const known = session.known(file.path);
      if (known === undefined) {
        if (reachedDirs.has(file.dir)) reachedNow.push({ file, tier: tierOf(i, 1) });
        else others.push({ file, tier: tierOf(i, 2 + hierarchy.tiers[i]!) });
      } else if (known.held === "named") {
        if (reachedDirs.has(file.dir)) reachedNow.push({ file, tier: tierOf(i, 1) });
      } else if (known.sha256 !== file.sha256) updated.push({ file, tier: tierOf(i, 0) });
    });
    const deleted: string[] = [];
    for (const path of [...session.knownPaths()]) {
      const known = session.known(path)!;
      if (!hierarchy.byPath.has(path) && (hierarchy.dirSet.has(known.dir) || known.loose === true)) deleted.push(path);
    }
    // Priority: critical files, then what the model holds stale, then this call's chain closest first, then anything else new.
    const ordered = [...updated, ...reachedNow.sort((a, b) => depth(b.file.dir) - depth(a.file.dir)), ...others];
    const isCritical = (item: { tier: number }) => item.tier === CRITICAL_TIER;
    const items = ordered.some(isCritical) ? [...ordered.filter(isCritical), ...ordered.filter((item) => !isCritical(item))] : ordered;
    // The plan names what does not fit, and makes no block at all without room for that list: the
    // deletion and watch notices leave room for it (else a block of notices was never made, step after
    // step), and for the critical files when they fit the step.
    const updatedPaths = new Set(updated.map((item) => item.file.path));
    // Weighed only when there is something to tell (a delivery is made at every tool call).
    const listRoom = deleted.length === 0 && session.notices.length === 0 ? 0 : this.noticeReserve("delivery", items, session.stepTokensLeft, updatedPaths);
    const told = this.deletionsToTell(session, deleted, listRoom);
    // Deletions left for a later delivery: this one is not the last word on these files.
    const settled = told.length === deleted.length;
    // Those said now: a notice pushed while this block is composed waits for the next delivery.
    const deletedRels = told.map((path) => this.relOf(path));
    const notices = noticesFor(session.notices, "delivery", deletedRels, session.stepTokensLeft - listRoom, this.settings.options.deliveryTokens, this.noticeLetGo);
    if (items.length === 0 && told.length === 0 && notices.length === 0) {
      if (settled) session.quietKey = quietKey;
      return "";
    }
    const composed = await this.compose("delivery", items, session.stepTokensLeft, {
      updated: updatedPaths,
      deleted: deletedRels,
      notices,
    });
    if (composed.failed) return "";
    // Every file only named, each known by name already: sent, it would repeat its list at every call
    // that reaches those directories, and never a file (a path longer than the budget leaves, on a
    // deep chain of long names, was 3.7 KB at every call for a 15-token file).
    const repeatsNames = composed.entries.length > 0 && composed.entries.every((entry) => entry.state === "pending" && session.known(entry.key)?.held === "named");
    if (repeatsNames && told.length === 0 && notices.length === 0) {
      if (settled) session.namedOnly = { key: namedKey(), tokens: session.stepTokensLeft };
      return "";
    }
    if (composed.text === "") {
      // Its frame alone passes what the step has left: it told nothing, so nothing is dropped or
      // recorded as sent (the next step's first delivery tells it all), and no later call of this
      // step has room for a block either.
      session.stepTokensLeft = 0;
      return "";
    }
    for (const path of told) {
      session.drop(path);
      if (session.system?.paths.has(path) === true) session.noted(carrier, path);
    }
    for (const notice of session.notices.splice(0, notices.length)) {
      const path = session.noticeFiles.get(notice);
      if (path === undefined) continue;
      session.noticeFiles.delete(notice);
      session.noted(carrier, path);
    }
    this.remember(session, composed, carrier, hierarchy);
    session.stepTokensLeft -= composed.tokens;
    if (settled) session.quietKey = quietKey;
    return composed.text;
  }

  /**
   * What a block of `items` within `budget` keeps from its notices: room for the list of files left
   * out (the plan makes no block without it; none when everything whole costs less), and for the
   * critical files: notices wait for a later block rather than grow this one past its budget (it
   * grows only for critical files that pass it themselves, see budgetFor). A delivery's critical files
   * that pass what the step has left keep it all: once sent they leave the next delivery's items,
   * which then tells the notices. A system block is made again each step, with the same files: there
   * its notices take what is left beside critical files that pass it, else they would never be told.
   */
  private noticeReserve(kind: BlockKind, items: readonly { file: FileVersion; tier: number }[], budget: number, updated?: ReadonlySet<string>): number {
    const list = listRoomBeside(kind, items, updated);
    const bare = listRoomFor(kind, items.length);
    // Everything whole costs less than the list: the critical files are in that figure already.
    if (list < bare) return list;
    let critical = 0;
    for (const { file, tier } of items) if (tier === CRITICAL_TIER) critical += wholeCost(file, updated?.has(file.path) === true);
    if (critical === 0) return list;
    if (critical + list + frameCost(kind, [], textBound) <= budget) return list + critical;
    return kind === "delivery" ? budget : list;
  }

  /**
   * The deleted files (of `deleted`, in order) whose notices fit what the step has left beside
   * `listRoom` (the list of files that may not fit): they open the block and may fill it; the rest
   * are told by the next deliveries (a checkout that removes hundreds of delivered files takes
   * several). A notice longer than a whole block is let go, logged.
   */
  private deletionsToTell(session: Session, deleted: readonly string[], listRoom: number): string[] {
    if (deleted.length === 0) return [];
    const frame = frameCost("delivery", [], textBound);
    const blockRoom = this.settings.options.deliveryTokens - frame;
    let room = session.stepTokensLeft - frame - listRoom;
    const told: string[] = [];
    for (const path of deleted) {
      const cost = textBound(deletedNotice(this.relOf(path)));
      if (cost > blockRoom) {
        session.drop(path);
        this.settings.log.once(`deleted:${path}`, "warn", `${this.relOf(path)} was deleted, but its notice is larger than a whole block (option deliveryTokens): the model is not told`);
        continue;
      }
      if (cost > room) break;
      room -= cost;
      told.push(path);
    }
    return told;
  }

  private readonly noticeLetGo = (notice: string): void => {
    const option = this.delivery === "system" ? "systemTokens" : "deliveryTokens";
    this.settings.log.once(`notice:${notice}`, "warn", `a notice larger than a whole block (option ${option}) could not be told: ${notice}`);
  };

  /** Records what a composed block gave the model of each file. */
  private remember(session: Session, composed: Composed, carrier: string, hierarchy: Hierarchy): void {
    for (const entry of composed.entries) {
      const file = hierarchy.byPath.get(entry.key);
      if (file === undefined) continue;
      // A file only named (it did not fit) is known by name: a later tool call that reaches its
      // directory delivers it. Leaving it due would re-plan a backlog of such files on every call.
      const held: Held = entry.state === "whole" ? "whole" : entry.state === "cut" ? "cut" : "named";
      session.hold(file.path, { sha256: file.sha256, held, carrier, dir: file.dir, ...looseIn(hierarchy, file), ...(held === "cut" ? { tokens: entry.sentTokens ?? 0 } : {}) });
    }
  }

  private items(session: Session, hierarchy: Hierarchy, keep: (file: FileVersion) => boolean): { file: FileVersion; tier: number }[] {
    const items: { file: FileVersion; tier: number }[] = [];
    hierarchy.files.forEach((file, i) => {
      if (!session.unloaded.has(file.path) && keep(file)) items.push({ file, tier: hierarchy.tiers[i]! });
    });
    return items;
  }

  private compose(kind: BlockKind, items: readonly { file: FileVersion; tier: number }[], budget: number, extras?: ComposeExtras): Promise<Composed> {
    return compose(kind, items, this.budgetFor(kind, items, budget, extras), this.settings.log, extras);
  }

  /**
   * `priority: critical` files are never cut or dropped: when they pass the budget together with what
   * the block carries anyway (its frame, deletion and watch notices), the block gets what they need,
   * weighed as the plan weighs it (each one's section head and tail, its exact count or provable
   * bound, and the list of the files left out), and a warning says so. (A flat allowance per file was
   * short of a long path's head, or of notices sharing the block: the plan then cut the critical file.)
   */
  private budgetFor(kind: BlockKind, items: readonly { file: FileVersion; tier: number }[], budget: number, extras?: ComposeExtras): number {
    let need = 0;
    const critical: string[] = [];
    for (const { file, tier } of items) {
      if (tier !== CRITICAL_TIER) continue;
      need += wholeCost(file, extras?.updated?.has(file.path) === true);
      critical.push(file.rel);
    }
    if (critical.length === 0) return budget;
    need += frameCost(kind, extras?.deleted ?? [], textBound) + (extras?.notices ?? []).reduce((sum, notice) => sum + textBound(notice), 0);
    // The others may all be left out: beside critical files the plan's list names as few as it must, a bare count at least.
    need += listRoomFor(kind, items.length - critical.length);
    if (need <= budget) return budget;
    this.settings.log.once(`critical:${kind}:${critical.join(",")}:${need}`, "warn", `priority: critical files (${critical.join(", ")}) need about ${need} tokens, more than the ${kind} budget of ${budget}: sent whole anyway`);
    return need;
  }

  /** The file of the hierarchy a host path names: OpenCode names files by their lexical path, the store by their real one. */
  private fileNamed(hierarchy: Hierarchy, named: string): FileVersion | undefined {
    const direct = hierarchy.byPath.get(named);
    if (direct !== undefined || !isInside(named, this.settings.worktree)) return direct;
    return hierarchy.byPath.get(join(this.store.realRoot, relative(this.settings.worktree, named)));
  }

  /** Whether one of `outputs` shows a copy of a file: a section of the plugin's, or OpenCode's marker line for it (by its real or its worktree path). */
  private showing(session: Session, carrier: string, outputs: readonly KeptOutput[] | undefined): (path: string) => boolean {
    if (outputs === undefined) return () => false;
    // Each output read once: the section heads of a block the plugin appended under this id (a tool's
    // own text that looks like one is none), and the paths of OpenCode's reminder entries (those of a
    // read's metadata.loaded: another output's text shaped like a reminder is the tool's own).
    const sections = new Set<string>();
    const marked = new Set<string>();
    for (const { text: output, loaded } of outputs) {
      const block = appendedBlock(output);
      if (block !== undefined && session.deliveredOn(carrier, block)) {
        for (let at = block.indexOf(SECTION_START); at !== -1; at = block.indexOf(SECTION_START, at + 1)) sections.add(block.slice(at, block.indexOf('"', at + SECTION_START.length) + 1));
      }
      if (loaded.length > 0) for (const path of hostEntryPaths(reminderOf(output))) if (loaded.includes(path)) marked.add(path);
    }
    return (path) => {
      const rel = this.relOf(path);
      return sections.has(sectionPrefix(rel)) || marked.has(path) || marked.has(join(this.settings.worktree, rel));
    };
  }

  private relOf(path: string): string {
    return relative(this.store.realRoot, path);
  }

  /** A worktree path as the tool's text shows it: one line, no tag or host marker (file names are repository content). */
  private shownRel(path: string): string {
    return escapePath(this.relOf(path) || ".");
  }

  /**
   * Rebuilds a session this process has not seen (continued with `opencode run -c`, or forgotten):
   * its touches from the tool calls in its history, the files still carried by its tool outputs and
   * messages, and a system block rebuilt from what it had at its start or last compaction.
   */
  private restore(session: Session): Promise<void> {
    session.restoring ??= this.readBack(session);
    return session.restoring;
  }

  private async readBack(session: Session): Promise<void> {
    const messages = this.settings.client?.session?.messages;
    if (typeof messages !== "function") return;
    let expire: () => void = () => {};
    const timeout = new Promise<undefined>((resolve) => (expire = () => resolve(undefined)));
    const timer = setTimeout(() => expire(), HISTORY_TIMEOUT_MS);
    // A slow history read must not keep a finished process alive.
    timer.unref?.();
    try {
      const response = await Promise.race([messages.call(this.settings.client!.session, { path: { id: session.id } }), timeout]);
      const history = readHistory((response as { data?: unknown } | undefined)?.data);
      // Before its first user message in this process, a restored session is its latest message's agent's.
      if (history.agent !== undefined) session.agent ??= history.agent;
      if (history.calls.length === 0) return;
      const touches = (calls: typeof history.calls) =>
        calls.flatMap((call) => toolPaths(call.tool, call.input, this.settings.directory, this.settings.worktree));
      // The system block it had: the hierarchy of the touches before its last compaction (none: its start).
      session.touch(touches(history.calls.slice(0, history.compactedCalls)));
      // The worktree's always, agent and rule files are in what the history carries too: read before
      // the catalog is built, they were sent again once it was, and their deletion never told. Waited
      // for as long as a catalog normally takes, no longer (git may hang: 10 s, or a wrapper's child).
      await Promise.race([this.catalogBuilt(), new Promise((resolve) => setTimeout(resolve, RESTORE_CATALOG_WAIT_MS).unref?.())]);
      const baseline = await this.fresh(session);
      const baselinePaths = new Set(baseline.files.map((file) => file.path));
      session.system = { text: "", paths: baselinePaths };
      // A compaction reported while the history was read stays a compaction.
      if (session.rebuild === "start") session.rebuild = "pruned";
      session.touch(touches(history.calls.slice(history.compactedCalls)));
      // Pins and unloads made with the tool survive a restart: replayed in the order they were made.
      for (const call of history.calls) {
        const input = call.input as Partial<Record<keyof ContextToolArgs, unknown>> | undefined;
        if (call.tool !== CONTEXT_TOOL || typeof input?.path !== "string" || (input.action !== "load" && input.action !== "unload")) continue;
        const target = this.resolveTarget(input.path);
        if (typeof target === "string") continue;
        if (input.action === "load") this.pinTarget(session, target);
        else this.unloadTarget(session, target, await this.fresh(session, true));
      }
      const hierarchy = await this.fresh(session);
      // Oldest first: a later copy of another version of a file, or the notice of its deletion, is the
      // model's latest word on it, whatever an earlier output carried of the text on disk now. The
      // files a text names are found by their section heads and notices, not by trying every file
      // on every text (600 outputs of a 600-file session took 2.5 s in one task), in slices.
      const byHead = new Map(hierarchy.files.map((file) => [sectionPrefix(file.rel), file]));
      // A notice as this version writes it, and as 0.3.17 did (its path unquoted): a continued
      // session's history may hold either, and a notice not recognized left the file held whole.
      const byNotice = new Map(hierarchy.files.flatMap((file) => [[deletedNotice(file.rel), file], [`[${escapeInline(file.rel)}${DELETED_TAIL}`, file]] as const));
      const holdWhole = (file: FileVersion, carrier: string) => session.hold(file.path, { sha256: file.sha256, held: "whole", carrier, dir: file.dir, ...looseIn(hierarchy, file) });
      await inSlices(history.carried, RESTORE_SLICE_MS, ({ text, carrier, loaded }) => {
        const block = appendedBlock(text);
        if (block !== undefined) session.delivered(carrier, block);
        for (const named of loaded) {
          const file = this.fileNamed(hierarchy, named);
          if (file === undefined) continue;
          // OpenCode's raw copy of a file whose text the rules made (imports inlined, sections merged) is not that text.
          if (reminderCarries(text, named, file.raw) && file.source === undefined) holdWhole(file, carrier);
          // Another text of it (an older version, or the raw one of a made text); none at all is a reminder the plugin took out as a repeat.
          else if (text.includes(`${HOST_MARKER}${named}\n`)) session.drop(file.path);
        }
        if (!text.includes("<project-context")) return;
        for (let at = text.indexOf(SECTION_START); at !== -1; at = text.indexOf(SECTION_START, at + 1)) {
          const file = byHead.get(text.slice(at, text.indexOf('"', at + SECTION_START.length) + 1));
          if (file === undefined) continue;
          if (wholeSections(file).some((section) => text.includes(section))) holdWhole(file, carrier);
          else session.drop(file.path);
        }
        for (let at = text.indexOf(DELETED_TAIL); at !== -1; at = text.indexOf(DELETED_TAIL, at + 1)) {
          const file = byNotice.get(text.slice(text.lastIndexOf("\n", at) + 1, at + DELETED_TAIL.length));
          if (file !== undefined) session.drop(file.path);
        }
      });
      // What the conversation no longer carries as it is now (pruned since, or edited since it was
      // sent) goes back to the system block, so the continued run's first request has it: that run
      // may answer without a single tool call.
      for (const file of hierarchy.files) if (session.known(file.path) === undefined && !baselinePaths.has(file.path)) session.returning.add(file.path);
    } catch (error) {
      this.settings.log.once(`history:${session.id}`, "warn", `could not read the history of session ${session.id}: ${String(error)}`);
    } finally {
      clearTimeout(timer);
    }
  }

}

/** A tool's path: as given (absolute, lexical) and settled. */
interface Target {
  readonly path: string;
  readonly real: string;
  readonly isFile: boolean;
}

/** The worktree index's messages, each said once. */
function indexLogOf(log: Logger): (level: "warn" | "info", message: string) => void {
  return (level, message) => log.once(`index:${message}`, level, message);
}

/** The hierarchy with files it does not reach by a walk (always, attached, pinned rule files), last. */
function withExtras(hierarchy: Hierarchy, extras: readonly FileVersion[]): Hierarchy {
  const fresh = extras.filter((file) => !hierarchy.byPath.has(file.path));
  if (fresh.length === 0) return hierarchy;
  const tier = (hierarchy.tiers.at(-1) ?? -1) + 1;
  return {
    ...hierarchy,
    files: [...hierarchy.files, ...fresh],
    tiers: [...hierarchy.tiers, ...fresh.map(() => tier)],
    byPath: new Map([...hierarchy.byPath, ...fresh.map((file): [string, FileVersion] => [file.path, file])]),
    chains: [...hierarchy.chains, ...fresh.map((file) => [file])],
  };
}

function printOf(paths: readonly string[]): string {
  return paths.map(statPrint).join("|");
}



function sameMembers(a: ReadonlySet<string>, b: ReadonlySet<string>): boolean {
  if (a.size !== b.size) return false;
  for (const item of a) if (!b.has(item)) return false;
  return true;
}

function sameSnapshot(a: readonly FileSnapshot[], b: readonly FileSnapshot[]): boolean {
  return a.length === b.length && a.every((x, i) => sameFile(x, b[i]!));
}

function entriesByPath(composed: Composed): Map<string, Composed["entries"][number]> {
  return new Map(composed.entries.map((entry) => [entry.key, entry]));
}

function stateText(file: FileRecord): string {
  switch (file.state) {
    case "system":
      return `whole in the system block${file.reason ? ` (${file.reason})` : ""}`;
    case "cut":
      return `cut to fit the budget: ${file.left} tokens left out (read ${file.path} for the rest)`;
    case "conversation":
      return `whole in the conversation (a tool output or message)${file.reason ? ` (${file.reason})` : ""}`;
    case "host":
      return "in OpenCode's own prompt";
    case "omitted":
      return `not in the context: ${file.reason}`;
    case "unloaded":
      return `unloaded: ${file.reason}`;
  }
}

/** A file off the hierarchy's chains (an always, agent, pinned or rule file) is held `loose`: its leaving is announced wherever it lies. */
function looseIn(hierarchy: Hierarchy, file: FileVersion): { loose?: true } {
  return hierarchy.dirSet.has(file.dir) ? {} : { loose: true };
}

/** A restore's work on its history, per slice of the event loop. */
const RESTORE_SLICE_MS = 4;
/** How long a continued session's restore waits for the worktree catalog: its usual build on a 10,000-file repo, with room. */
const RESTORE_CATALOG_WAIT_MS = 1000;
/** How every section head starts, and how a deletion notice ends (see render.ts). */
const SECTION_START = sectionPrefix("").slice(0, -1);
/**
 * A deletion notice from the end of its path on (`deletedNotice("")` starts `[""`): the quote that
 * closes the path is left out, so that a notice of 0.3.17, whose path was not quoted, is found too.
 */
const DELETED_TAIL = deletedNotice("").slice(3);

function depth(dir: string): number {
  let count = 0;
  for (let at = dir.indexOf("/"); at !== -1; at = dir.indexOf("/", at + 1)) count++;
  return count;
}

function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((item): item is string => typeof item === "string") : [];
}

/** A file whose rules need the worktree index: imports (what git ignores anywhere) and watch globs (the listing). */
const needsIndex = (file: FileVersion): boolean => hasImports(file) || readContract(file.frontmatter).watch.length > 0;
