import { basename, sep } from "node:path";
import { CRITICAL_TIER } from "../block/plan.ts";
import type { FileVersion } from "../files/contained.ts";
import { AT_LINE, StoredVersion } from "../files/version.ts";
import type { IncludeMode } from "../records/format.ts";
import { sha256Hex } from "../hash.ts";
import { relativePosix } from "../paths.ts";
import type { Hierarchy } from "../session/hierarchy.ts";
import { appliesToAgent, DEFAULT_CONTRACT, matchesPaths, readContract, type Contract, type Priority } from "./contract.ts";
import { expandImports, type ImportRead } from "./imports.ts";
import { mergeChains, type Merged, type MergeFile } from "./merge.ts";

/** What the session brings to the rules: who asks, what it touched and pinned, what was attached for it. */
export interface RuleContext {
  /** The agent of the session's latest user message. */
  readonly agent: string;
  /** Real paths of the files the session touched (a `paths:` glob matches these). */
  readonly touchedFiles: readonly string[];
  /** Files whose `paths:` matched once: they stay, like any touch (grows). */
  readonly matched: Set<string>;
  /** Real paths of files pinned (tool, TUI, `pin` option): a `manual` file loads only so. */
  readonly pinnedFiles: ReadonlySet<string>;
  /** Real directories pinned: their own `manual` file loads too. */
  readonly pinnedDirs: ReadonlySet<string>;
  /** `always` files of the worktree (real paths): in every session. */
  readonly always: ReadonlySet<string>;
  /** Files found by the `rules` globs: their `paths` are relative to the worktree, not to their directory. */
  readonly ruleFiles: ReadonlySet<string>;
  /** `agent` files attached to this session by ranking, with their scores. */
  readonly attached: ReadonlyMap<string, number>;
  readonly read: ImportRead;
  readonly worktree: string;
  /** A context file override's name → the base name it replaces (see contextNamesOf). */
  readonly replaces: ReadonlyMap<string, string>;
  /** One warning for a file version's import problem. */
  readonly warn: (file: FileVersion, message: string) => void;
  /** What the last application for this session matched (its `screened`): only what is new since is matched again. */
  readonly screened?: Screened;
}

/**
 * Which touched files were matched against which waiting versions: each of `touched` against each
 * of `waiting` (a version with the base its `paths:` are relative to). Whether one matches the other
 * depends on nothing else, and a match is kept in `matched` for good, so the next application
 * matches a touched file of this list only against the versions that wait since. A 2,000-directory
 * session reaching a new directory matched its 2,000 touched files again (1.7 ms of a 10.9 ms step).
 */
export interface Screened {
  readonly touched: ReadonlySet<string>;
  readonly waiting: ReadonlyMap<FileVersion, string>;
}

export interface Awaiting {
  readonly file: FileVersion;
  readonly contract: Contract;
  /** The directory its `paths` are relative to: its own, or the worktree for a rule file. */
  readonly base: string;
}

export interface Mode {
  readonly mode: IncludeMode;
  readonly score?: number;
}

/** The hierarchy after the rules: what loads, in the budget's order, with the text the model gets. */
export interface Ruled extends Hierarchy {
  /** How each file that loads came to be in the session, where that is not `touched` (the default of most). */
  readonly modes: ReadonlyMap<string, Mode>;
  /** Files of the hierarchy left out, and why (explain and records). */
  readonly excluded: ReadonlyMap<string, string>;
  /** Real paths of the files imports inlined: checked for changes by the caller. */
  readonly imports: readonly string[];
  /** Files that load and keep an eye on others (`watch:`). */
  readonly watchers: readonly FileVersion[];
  /** Files left out only until a touched file matches their `paths:`, by base directory (see awaitedBy). */
  readonly awaiting: ReadonlyMap<string, readonly Awaiting[]>;
  /** For the next application (see RuleContext.screened). */
  readonly screened: Screened;
}

const NO_MODES: ReadonlyMap<string, Mode> = new Map();
const NO_REASONS: ReadonlyMap<string, string> = new Map();
const NO_WAITING: ReadonlyMap<string, readonly Awaiting[]> = new Map();
const NOTHING_MERGED: Merged = { bodies: new Map(), dropped: new Map(), notes: new Map() };
const NOTHING_SCREENED: Screened = { touched: new Set(), waiting: new Map() };

/** Tiers the budget fills in order: critical and high before every closest-first tier (0, 1, ...), low after all. */
const TIER_OF: Record<Exclude<Priority, "normal">, number> = { critical: CRITICAL_TIER, high: -1, low: Number.MAX_SAFE_INTEGER };

/**
 * Applies each file's frontmatter contract to a session's hierarchy: include modes (a `manual` file
 * only when pinned), `paths` (only once a touched file matches, then for good), `agents` and
 * `exclude_agents`, imports, `merge` down the chains, and `priority` (critical first, then high,
 * then the closest-first tiers, `low` last). Returns a hierarchy of the files that load: a file
 * whose text merging or imports changed is a derived version (same path, its own hash); `source`
 * keeps the version on disk.
 */
export function applyRules(hierarchy: Hierarchy, context: RuleContext): Ruled {
  // The common case, a hierarchy of plain files touched: nothing to decide, nothing to copy (a
  // 2,000-file hierarchy is ruled again at every new touch).
  const plain =
    context.always.size === 0 &&
    context.attached.size === 0 &&
    hierarchy.files.every((file) => readContract(file.frontmatter) === DEFAULT_CONTRACT && !hasImports(file) && overrideNote(file, context) === undefined);
  if (plain) return { ...hierarchy, modes: NO_MODES, excluded: NO_REASONS, imports: [], watchers: [], awaiting: NO_WAITING, screened: NOTHING_SCREENED };
  // This runs for every file of a session's hierarchy whenever its files change (each new directory
  // of a 2,000-directory session): per file, entries of arrays by the file's index, and maps only
  // for what is not the common case (a mode other than touched, a body that imports changed).
  const { files: all } = hierarchy;
  const excluded = new Map<string, string>();
  const modes = new Map<string, Mode>();
  const kept = new Uint8Array(all.length);
  const awaiting: Awaiting[] = [];
  const contracts = all.map((file) => readContract(file.frontmatter));
  const exclusions = all.map((file, i) => exclusion(file, contracts[i]!, context));
  const waitingItems: Awaiting[] = [];
  const waitingAt: (Awaiting | undefined)[] = all.map((file, i) => {
    const waiting = exclusions[i] === undefined ? waitingFor(file, contracts[i]!, hierarchy, context) : undefined;
    if (waiting !== undefined) waitingItems.push(waiting);
    return waiting;
  });
  // Which waiting files a touched file matches: each touched file asks the directories above it (a
  // few lookups), not each waiting file every touched file (2,000 x 4,000 in a large session).
  const waiting = byBase(waitingItems);
  const { screened } = context;
  const waitingSince = screened === undefined ? waiting : byBase(waitingItems.filter((item) => screened.waiting.get(item.file) !== item.base));
  for (const path of context.touchedFiles) {
    const against = screened?.touched.has(path) === true ? waitingSince : waiting;
    if (against.size > 0) for (const hit of awaitedBy(against, path, context.worktree, context.matched)) context.matched.add(hit.file.path);
  }
  const nowScreened: Screened = { touched: new Set(context.touchedFiles), waiting: new Map(waitingItems.map((item) => [item.file, item.base])) };
  all.forEach((file, i) => {
    const waitingHere = waitingAt[i];
    const stillWaiting = waitingHere !== undefined && !context.matched.has(file.path);
    const why = exclusions[i] ?? (stillWaiting ? waitingReason(contracts[i]!) : undefined);
    if (why !== undefined) {
      excluded.set(file.path, why);
      if (stillWaiting) awaiting.push(waitingHere);
      return;
    }
    kept[i] = 1;
    const mode = modeOf(file, contracts[i]!, hierarchy, context, context.attached.get(file.path));
    if (mode !== MODES.touched) modes.set(file.path, mode);
  });
  const imports = new Set<string>();
  // Each file once in the block: a context file of the hierarchy, or a file imported already, stays
  // an import line. Made at the first file that imports (most hierarchies have none).
  let seen: Set<string> | undefined;
  const seenSoFar = () => (seen ??= new Set(all.map((file) => file.path)));
  // Bodies imports changed (most files have none: theirs is their own).
  const imported = new Map<string, string>();
  all.forEach((file, i) => {
    if (kept[i] === 0) return;
    const body = withImports(file, context, imports, seenSoFar);
    if (body !== undefined) imported.set(file.path, body);
  });
  // Merging goes down the chains as they load (an override's ancestors it replaces are left out);
  // when every file that loads appends (the common case), there is nothing to merge.
  const merging = all.some((_, i) => kept[i] === 1 && contracts[i]!.merge !== "append");
  const indexOf = merging ? new Map(all.map((file, i) => [file.path, i])) : undefined;
  const loads = (file: FileVersion) => kept[indexOf!.get(file.path)!] === 1;
  // One per file, however many chains go through it (the root's file is in all of them).
  const asMerged: (MergeFile | undefined)[] = [];
  const mergeFileOf = (file: FileVersion) => (asMerged[indexOf!.get(file.path)!] ??= mergeFile(file, imported.get(file.path)));
  const merged = merging ? mergeChains(hierarchy.chains.map((chain) => chain.filter(loads).map(mergeFileOf))) : NOTHING_MERGED;
  for (const [path, by] of merged.dropped) {
    kept[indexOf!.get(path)!] = 0;
    excluded.set(path, `overridden by ${by.join(", ")}`);
    modes.delete(path);
  }
  const files: FileVersion[] = [];
  const tiers: number[] = [];
  let reordered = false;
  all.forEach((file, i) => {
    if (kept[i] === 0) return;
    // Most files keep their own text: it is not even read then (a version keeps it packed).
    const rewritten = merged.bodies.get(file.path) ?? imported.get(file.path);
    const override = overrideNote(file, context);
    const mergeNotes = merged.notes.get(file.path);
    // Most files have no note: no array is made for them (this runs for every file at every new touch).
    const notes = override === undefined ? mergeNotes : [override, ...(mergeNotes ?? [])];
    const text = notes === undefined || notes.length === 0 ? rewritten : `${notes.map((note) => `[${note}]`).join("\n")}\n\n${rewritten ?? file.body}`;
    const { priority } = contracts[i]!;
    const tier = priority === "normal" ? hierarchy.tiers[i]! : TIER_OF[priority];
    reordered ||= tiers.length > 0 && tier < tiers[tiers.length - 1]!;
    files.push(text === undefined ? file : derive(file, text));
    tiers.push(tier);
  });
  if (reordered) {
    // Stable: equal tiers keep the hierarchy's closest-first order.
    const order = files.map((file, i) => ({ file, tier: tiers[i]! })).sort((a, b) => a.tier - b.tier);
    order.forEach(({ file, tier }, i) => ([files[i], tiers[i]] = [file, tier]));
  }
  const byPath = new Map<string, FileVersion>();
  for (const file of files) byPath.set(file.path, file);
  const watchers = files.filter((file) => readContract(file.frontmatter).watch.length > 0);
  return { ...hierarchy, files, tiers, byPath, modes, excluded, imports: [...imports], watchers, awaiting: byBase(awaiting), screened: nowScreened };
}

/** Why a file waiting for its `paths:` is left out: one string per contract (said for each such file at every new touch). */
const waitingReasons = new WeakMap<Contract, string>();

function waitingReason(contract: Contract): string {
  let reason = waitingReasons.get(contract);
  if (reason === undefined) waitingReasons.set(contract, (reason = `no touched file matches paths: ${contract.paths!.join(", ")}`));
  return reason;
}

/** Why a file is left out whatever was touched. */
function exclusion(file: FileVersion, contract: Contract, context: RuleContext): string | undefined {
  if (!appliesToAgent(contract, context.agent)) return `not for the agent "${context.agent}" (agents/exclude_agents)`;
  if (contract.include === "manual" && !pinnedIn(file, context)) return "include: manual, and not pinned (load it with the project_context tool)";
  return undefined;
}

const pinnedIn = (file: FileVersion, context: RuleContext) => context.pinnedFiles.has(file.path) || context.pinnedDirs.has(file.dir);

/**
 * A file that loads only once a touched file matches its `paths:` (reached through a touch, or a
 * rule file not pinned; pinned, always or attached files load as asked), and none has yet.
 */
function waitingFor(file: FileVersion, contract: Contract, hierarchy: Hierarchy, context: RuleContext): Awaiting | undefined {
  if (contract.paths === undefined || context.matched.has(file.path)) return undefined;
  const pinned = pinnedIn(file, context);
  const rule = context.ruleFiles.has(file.path);
  const touchedOnly = !pinned && !context.always.has(file.path) && !context.attached.has(file.path) && !hierarchy.manual.has(file.path);
  return touchedOnly || (rule && !pinned) ? { file, contract, base: rule ? context.worktree : file.dir } : undefined;
}

/** Waiting files by the directory their `paths:` are relative to. */
export function byBase(waiting: readonly Awaiting[]): ReadonlyMap<string, readonly Awaiting[]> {
  const grouped = new Map<string, Awaiting[]>();
  for (const item of waiting) {
    const group = grouped.get(item.base);
    if (group === undefined) grouped.set(item.base, [item]);
    else group.push(item);
  }
  return grouped;
}

/**
 * The waiting files a touched file (a real path in the worktree) matches, but those in `matched`:
 * the files of each directory above it.
 */
export function* awaitedBy(waiting: ReadonlyMap<string, readonly Awaiting[]>, touchedFile: string, worktree: string, matched: ReadonlySet<string>): Generator<Awaiting> {
  // A few directories (what waits since the last application, most often): asking each whether it
  // holds the touched file is cheaper than a lookup for every directory above it.
  if (waiting.size <= FEW_BASES) {
    for (const [base, items] of waiting) {
      const holds = base.length >= worktree.length && touchedFile.length > base.length && touchedFile.startsWith(base) && (base.endsWith(sep) || touchedFile[base.length] === sep);
      if (holds) for (const item of items) if (!matched.has(item.file.path) && pathsMatch(item, touchedFile)) yield item;
    }
    return;
  }
  for (let end = touchedFile.lastIndexOf(sep); end >= 0; end = touchedFile.lastIndexOf(sep, end - 1)) {
    const dir = end === 0 ? sep : touchedFile.slice(0, end);
    if (dir.length < worktree.length) return;
    const items = waiting.get(dir);
    if (items !== undefined) for (const item of items) if (!matched.has(item.file.path) && pathsMatch(item, touchedFile)) yield item;
    if (end === 0) return;
  }
}

/** Up to this many directories with waiting files, awaitedBy asks each rather than walking up. */
const FEW_BASES = 4;

/** Whether a touched file (a real path below `base`, as awaitedBy asks) is one a file's `paths:` asks for. */
function pathsMatch({ contract, base }: Awaiting, touchedFile: string): boolean {
  return matchesPaths(contract, relativePosix(base, touchedFile));
}

/** The modes without a score, one value each (every file of a hierarchy gets one at every new touch). */
const MODES: Readonly<Record<"always" | "manual" | "agent" | "touched", Mode>> = { always: { mode: "always" }, manual: { mode: "manual" }, agent: { mode: "agent" }, touched: { mode: "touched" } };

function modeOf(file: FileVersion, contract: Contract, hierarchy: Hierarchy, context: RuleContext, score: number | undefined): Mode {
  if (score !== undefined) return { mode: "agent", score };
  if (context.always.has(file.path) || contract.include === "always") return MODES.always;
  if (hierarchy.manual.has(file.path) || contract.include === "manual") return MODES.manual;
  return contract.include === "agent" ? MODES.agent : MODES.touched;
}

/**
 * `AGENTS.override.md` takes the place of its directory's `AGENTS.md`, which OpenCode may still send
 * itself (its own prompt reads the base name): the model is told which one wins.
 */
function overrideNote(file: FileVersion, context: RuleContext): string | undefined {
  // A rule file found by the `rules` globs replaces nothing, whatever its name.
  const base = context.ruleFiles.has(file.path) ? undefined : context.replaces.get(basename(file.path));
  return base === undefined ? undefined : `this file replaces ${base} of its directory: where they disagree, follow this one`;
}

/**
 * Per version, its body when it has a line starting with `@` (an import, maybe), else false: found
 * once per version. Such a body is expanded again at every new touch, so it is kept decoded (a
 * version's text is decoded at each read: version.ts); most files import nothing and keep none.
 */
const importing = new WeakMap<FileVersion, string | false>();

function importingBody(file: FileVersion): string | false {
  // A stored version knows without decoding its text (most have no such line).
  if (file instanceof StoredVersion && !file.atLine) return false;
  let found = importing.get(file);
  if (found === undefined) {
    const body = file.body;
    importing.set(file, (found = AT_LINE.test(body) ? body : false));
  }
  return found;
}

export function hasImports(file: FileVersion): boolean {
  return importingBody(file) !== false;
}

/** The body of a file that may import (see hasImports) with its imports inlined; undefined when that changed nothing. */
function withImports(file: FileVersion, context: RuleContext, imported: Set<string>, seen: () => Set<string>): string | undefined {
  const body = importingBody(file);
  if (body === false) return undefined;
  const expansion = expandImports(body, file.path, context.worktree, context.read, seen());
  for (const problem of expansion.problems) context.warn(file, problem.message);
  for (const file of expansion.imports) imported.add(file.path);
  return expansion.text === body ? undefined : expansion.text;
}

/** A file as merging sees it: its text (as imports left it) read only if sections are merged. */
function mergeFile(file: FileVersion, imported: string | undefined): MergeFile {
  return {
    key: file.path,
    version: imported ?? file,
    rel: file.rel,
    get body() {
      return imported ?? file.body;
    },
    merge: readContract(file.frontmatter).merge,
  };
}

/** A file version with the text the rules gave it: derived once per (version, text), so its token counts are kept. */
const derived = new WeakMap<FileVersion, { readonly body: string; readonly version: FileVersion }>();

function derive(file: FileVersion, body: string): FileVersion {
  // The memo first: the file's own text is decoded at each read (version.ts), the memo's is at hand.
  const known = derived.get(file);
  if (known !== undefined && known.body === body) return known.version;
  const version = body === file.body ? file : StoredVersion.derived(file, body, sha256Hex(file.sha256, "\0", body));
  derived.set(file, { body, version });
  return version;
}
