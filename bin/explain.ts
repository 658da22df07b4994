#!/usr/bin/env bun
/**
 * explain [dir] [--touch <path>]... [--worktree <dir>] [--system-tokens N] [--compaction-tokens N] [--delivery stable|system] [--no-host]
 * explain --session <id> [--records <dir>] [--last N | --all] [--json]
 *
 * The first form shows what the plugin gives a session in `dir` that touched the given paths, by
 * running the same engine the plugin's hooks run: the files that apply (priority order, tokens, why,
 * and what the model holds of each), the system block, what rides on each tool call, and the
 * compaction copy. The second prints what a real session's requests had, from its records.
 */
import { closeSync, constants, fstatSync, openSync, readdirSync, readSync, realpathSync, statSync } from "node:fs";
import { realpath, stat } from "node:fs/promises";
import { dirname, join, relative, resolve } from "node:path";
import { parseArgs } from "node:util";
import { tokensOf } from "../plugin/block/compose.ts";
import { Engine } from "../plugin/engine.ts";
import { describeProblem, readContract } from "../plugin/rules/contract.ts";
import { readContained } from "../plugin/files/contained.ts";
import { createLogger } from "../plugin/log.ts";
import { isInside } from "../plugin/paths.ts";
import { DEFAULT_OPTIONS, resolveOptions } from "../plugin/options.ts";
import { terminalJson, terminalSafe, terminalText } from "../plugin/terminal.ts";
import { defaultRecordsDir, isSessionId, MAX_RECORDS_BYTES, parseRecords, RECORDS_VERSION, recordsPath, type RequestRecord } from "../plugin/records/format.ts";

/** Requests shown when --last is not given: a long session holds thousands, and the last few are what a user debugs. */
const DEFAULT_LAST = 20;

export { terminalJson, terminalSafe };

const USAGE = `usage: explain [dir] [--touch <path>]... [--worktree <dir>] [options]
       explain --session <id> [--records <dir>] [--last N | --all] [--json]

  dir                    the session directory (default: .)
  --touch <path>         a path the session touched, relative to dir (repeatable, in order)
  --worktree <dir>       the root no walk goes above (default: the enclosing git root, as OpenCode takes it)
  --system-tokens N      budget of the system block (default 8000)
  --delivery-tokens N    budget of what one step adds to tool outputs (default 6000)
  --compaction-tokens N  budget of the compaction copy (default 1000)
  --delivery MODE        stable (default) or system
  --no-host              show the blocks for a host that injects no instruction file itself
                         (by default, like OpenCode, the files from dir up to the root are the host's)

  --session <id>         print what each request of that session had, from the plugin's records:
                         per request its files (include mode, state, tokens) and what changed from
                         the request before; a file whose bytes on disk differ from its last
                         recorded version is marked [changed since] (or [deleted since])
  --records <dir>        where the records are (default: the plugin's, $XDG_STATE_HOME or
                         ~/.local/state, in opencode-project-context/; plugin option recordsDir)
  --last N               only the last N requests (default ${DEFAULT_LAST}); --all for every one
  --json                 the same as one JSON object`;

const ARG_OPTIONS = {
  touch: { type: "string", multiple: true },
  worktree: { type: "string" },
  "system-tokens": { type: "string" },
  "delivery-tokens": { type: "string" },
  "compaction-tokens": { type: "string" },
  delivery: { type: "string" },
  "no-host": { type: "boolean" },
  session: { type: "string" },
  records: { type: "string" },
  last: { type: "string" },
  all: { type: "boolean" },
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const;

const TREE_FLAGS = ["touch", "worktree", "system-tokens", "delivery-tokens", "compaction-tokens", "delivery", "no-host"] as const;
const SESSION_FLAGS = ["records", "last", "all", "json"] as const;

/** Runs `explain` with command-line arguments (without the command name); resolves to the exit code. */
export async function runExplain(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, allowPositionals: true, options: ARG_OPTIONS });
  } catch (error) {
    console.error(`explain: ${error instanceof Error ? error.message : String(error)}\n\n${USAGE}`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  if (values.session !== undefined) {
    const mixed = [...TREE_FLAGS.filter((flag) => values[flag] !== undefined), ...positionals];
    if (mixed.length > 0) return usageError(`--session reads records; it takes no ${mixed.map((flag) => JSON.stringify(flag)).join(", ")}`);
    return explainSession({ session: values.session, records: values.records, last: values.last, all: values.all === true, json: values.json === true });
  }
  const sessionOnly = SESSION_FLAGS.filter((flag) => values[flag] !== undefined);
  if (sessionOnly.length > 0) return usageError(`--${sessionOnly[0]} goes with --session <id>`);
  if (positionals.length > 1) return usageError(`one directory at most (got ${positionals.length})`);
  return explainTree(positionals[0], { ...values, touch: values.touch ?? [], "no-host": values["no-host"] === true });
}

function usageError(message: string): number {
  console.error(`explain: ${message}\n\n${USAGE}`);
  return 2;
}

type TreeValues = {
  touch: string[];
  worktree?: string;
  "system-tokens"?: string;
  "delivery-tokens"?: string;
  "compaction-tokens"?: string;
  delivery?: string;
  "no-host": boolean;
};

/** The real path of `path` when it is a directory. */
async function realDirectory(path: string): Promise<string | undefined> {
  const real = await realpath(resolve(path)).catch(() => undefined);
  return real !== undefined && (await stat(real).catch(() => undefined))?.isDirectory() === true ? real : undefined;
}

/** `explain [dir] --touch ...`: what the engine gives a session in `dir` that touched those paths. */
async function explainTree(dir: string | undefined, values: TreeValues): Promise<number> {
  const directory = await realDirectory(dir ?? ".");
  if (directory === undefined) {
    console.error(`explain: no such directory: ${terminalSafe(String(dir))}`);
    return 2;
  }
  // Real, as the session directory is (OpenCode passes both real): a worktree given through a symlink would hold no touch.
  const worktree = values.worktree === undefined ? await gitRoot(directory) : await realDirectory(values.worktree);
  if (worktree === undefined || !isInside(directory, worktree)) {
    console.error(worktree === undefined ? `explain: no such directory: ${terminalSafe(String(values.worktree))}` : `explain: the worktree ${terminalSafe(worktree)} does not hold ${terminalSafe(directory)}`);
    return 2;
  }
  const given: Record<string, unknown> = { watch: false };
  const numeric = { systemTokens: "system-tokens", deliveryTokens: "delivery-tokens", compactionTokens: "compaction-tokens" } as const;
  for (const [option, flag] of Object.entries(numeric)) {
    const value = values[flag];
    if (value === undefined) continue;
    if (!/^\d+$/.test(value)) {
      console.error(`explain: --${flag} takes a whole number of tokens, not ${JSON.stringify(value)}`);
      return 2;
    }
    given[option] = Number(value);
  }
  if (values.delivery !== undefined) given.delivery = values.delivery;
  const problems: string[] = [];
  const options = await resolveOptions(given, (message) => problems.push(message));
  // What was asked on the command line, and cannot be had: no report on other values than asked.
  for (const problem of problems) console.error(`explain: ${problem}`);
  if (problems.length > 0) return 2;

  const engine = await Engine.create({ directory, worktree, options, log: createLogger(undefined), client: undefined });
  engine.startCatalog();
  try {
    const session = "explain";
    // The host's own prompt, as OpenCode builds it: its chain from the session directory up.
    const start = await engine.inspect(session);
    const hostFiles = values["no-host"] ? [] : start.hierarchy.files.filter((file) => start.hierarchy.dirSet.has(file.dir));
    const header = ["You are OpenCode.", ...hostFiles.map((file) => `Instructions from: ${join(worktree, file.rel)}\n${file.raw}`)].join("\n");
    const host = new Set(hostFiles.map((file) => file.path));

    console.log(`Session directory: ${terminalSafe(directory)}`);
    console.log(`Worktree:          ${terminalSafe(worktree)}`);
    console.log(`Delivery:          ${options.delivery}`);
    console.log(`Touched:           ${values.touch.length === 0 ? "(nothing yet)" : values.touch.map(terminalSafe).join(", ")}\n`);

    const first = await engine.system(session, [header]);
    const rides: string[] = [];
    for (const [i, path] of values.touch.entries()) {
      engine.touch(session, "read", { filePath: path });
      const result = { output: "" };
      await engine.afterTool(session, "read", `explain-${i}`, { filePath: path }, result);
      rides.push(result.output.trim());
    }
    const { hierarchy, system, compaction, catalog } = await engine.inspect(session);
    const states = new Map(system.entries.map((entry) => [entry.key, entry.state]));

    console.log("Context files that apply (most important first: the chain of the latest touch, closest first):");
    if (hierarchy.files.length === 0) console.log("  (none)");
    for (const [i, file] of hierarchy.files.entries()) {
      const reasons: string[] = [];
      for (const [path, startDir] of hierarchy.starts) {
        if (engine.store.walkOf(startDir).includes(file.dir)) reasons.push(path === directory ? "on the session directory's path" : `applies to ${relative(directory, path)}`);
      }
      if (file.root) reasons.push("root: true (nothing above it applies below it)");
      const contract = readContract(file.frontmatter);
      if (contract.priority !== "normal") reasons.push(`priority: ${contract.priority}`);
      if (contract.merge !== "append") reasons.push(`merge: ${contract.merge}`);
      if (contract.unknownKeys.length > 0) reasons.push(`unknown frontmatter keys ignored: ${contract.unknownKeys.join(", ")}`);
      for (const problem of contract.problems) reasons.push(`bad value: ${describeProblem(file.rel, problem)}`);
      const mode = hierarchy.modes.get(file.path);
      const state = host.has(file.path) ? "in OpenCode's own prompt" : `${states.get(file.path) ?? "omitted (budget)"} in a system-delivery block`;
      const shownMode = mode === undefined ? "touched" : `${mode.mode}${mode.score === undefined ? "" : ` (score ${mode.score})`}`;
      console.log(`  ${terminalSafe(file.rel)}  ${shownMode}  ${await tokensOf(file)} tokens  tier ${hierarchy.tiers[i]}  ${state}; ${terminalSafe(reasons.slice(0, 6).join("; "))}`);
    }
    if (hierarchy.excluded.size > 0) console.log("\nContext files on the way that do not load:");
    for (const [path, why] of hierarchy.excluded) console.log(`  ${terminalSafe(relative(engine.store.realRoot, path))}  ${terminalSafe(why)}`);
    const offered = catalog.filter((entry) => ![...hierarchy.byPath.values()].some((file) => file.rel === entry.rel));
    if (offered.length > 0) console.log("\nWorktree context files that load without a touch, not in this session:");
    for (const entry of offered) {
      const how = entry.include === "agent" ? "offered when a user message is about it" : entry.include === "manual" ? "when pinned (project_context load, or the pin option)" : "in every session";
      console.log(`  ${terminalSafe(entry.rel)}  ${entry.include}: ${how}${entry.description === undefined ? "" : `; ${terminalSafe(entry.description)}`}`);
    }
    console.log(`\nThe system block at the session's start (${options.delivery === "stable" ? "frozen until the next compaction" : "rebuilt every step"}):`);
    console.log(first === "" ? "(nothing: every file that applies is already in OpenCode's own prompt)" : terminalText(first));
    if (options.delivery === "stable") {
      values.touch.forEach((path, i) => {
        console.log(`\nAppended to the output of the tool call that touched ${terminalSafe(path)}:`);
        console.log(rides[i] === "" ? "(nothing new)" : terminalText(rides[i] ?? ""));
      });
    } else {
      console.log(`\nThe system block after the touches (${system.tokens} of ${options.systemTokens} tokens):`);
      console.log(system.text === "" ? "(nothing)" : terminalText(system.text));
    }
    console.log(`\nThe compaction copy (${compaction.tokens} of ${options.compactionTokens} tokens):`);
    console.log(compaction.text === "" ? "(nothing)" : terminalText(compaction.text));
    return 0;
  } finally {
    await engine.dispose();
  }
}

/** The enclosing git root, as OpenCode takes it for the worktree; the directory itself outside git. */
async function gitRoot(directory: string): Promise<string> {
  for (let dir = directory; ; dir = dirname(dir)) {
    if (await stat(join(dir, ".git")).then(() => true, () => false)) return dir;
    if (dirname(dir) === dir) return directory;
  }
}

// ---- explain --session: a session's requests, from the plugin's records ----

/**
 * Bytes read from the end of one records file at most. The plugin rotates a file at
 * MAX_RECORDS_BYTES, so only a file written by something else comes near this; it keeps memory
 * bounded (and under the engine's longest string) whatever lies in the records directory.
 */
const MAX_READ_BYTES = 64 * MAX_RECORDS_BYTES;
/** Sessions named when the one asked for has no records. */
const SESSIONS_LISTED = 20;

/** One records file as read: its requests, and what was skipped and why. */
export interface RecordsFile {
  readonly path: string;
  readonly bytes: number;
  readonly records: readonly RequestRecord[];
  /** Bytes before the tail that was read: the file was larger than the limit. */
  readonly unreadBytes: number;
  /** Lines that are no record: a torn line (being written when read), or not one of ours. */
  readonly unreadable: number;
  /** Records of another format version, counted by version. */
  readonly otherVersions: ReadonlyMap<string, number>;
}

/**
 * Reads a records file (at most its last `maxBytes`, starting at a whole line); undefined when there
 * is no such regular file. Non-blocking open: a FIFO put in its place cannot hang the command.
 */
export function readRecordsFile(path: string, maxBytes = MAX_READ_BYTES): RecordsFile | undefined {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return undefined;
    throw error;
  }
  try {
    const info = fstatSync(fd);
    if (!info.isFile()) return undefined;
    // Past the limit, one byte more is read: the byte before the tail tells whether the tail starts a line.
    const tail = info.size > maxBytes;
    const start = tail ? info.size - maxBytes - 1 : 0;
    const buffer = Buffer.allocUnsafe(info.size - start);
    let length = 0;
    while (length < buffer.length) {
      const read = readSync(fd, buffer, length, buffer.length - length, start + length);
      if (read === 0) break;
      length += read;
    }
    // What comes before the first line break is part of a line that began before the tail (a line
    // break byte never occurs inside a UTF-8 character, so the cut never splits one either).
    const firstBreak = buffer.subarray(0, length).indexOf(0x0a);
    // (A file one byte over the limit has its tail start at 1: `start` 0 is no whole file then.)
    const from = !tail ? 0 : firstBreak === -1 ? length : firstBreak + 1;
    const lines = classifyLines(buffer.subarray(from, length).toString("utf8"));
    return { path, bytes: info.size, unreadBytes: start + from, ...lines };
  } finally {
    closeSync(fd);
  }
}

/** The records among `text`'s lines (parsed by the format's own parser), and the lines it skipped, sorted by why. */
export function classifyLines(text: string): Pick<RecordsFile, "records" | "unreadable" | "otherVersions"> {
  const records: RequestRecord[] = [];
  const otherVersions = new Map<string, number>();
  let unreadable = 0;
  for (const line of text.split("\n")) {
    if (line === "") continue;
    const [record] = parseRecords(line);
    if (record !== undefined) {
      records.push(record);
      continue;
    }
    const version = versionOf(line);
    if (version === undefined) unreadable++;
    else otherVersions.set(version, (otherVersions.get(version) ?? 0) + 1);
  }
  return { records, unreadable, otherVersions };
}

/** The `v` of a JSON object line that is not this version, as text; undefined for anything else. */
function versionOf(line: string): string | undefined {
  try {
    const value: unknown = JSON.parse(line);
    if (typeof value !== "object" || value === null || !("v" in value) || value.v === RECORDS_VERSION) return undefined;
    return JSON.stringify(value.v) ?? "undefined";
  } catch {
    return undefined;
  }
}

/** A file of a request as shown: every field checked, since a records file is only text on disk. */
export interface FileView {
  readonly path: string;
  readonly sha256: string;
  readonly tokens: number;
  readonly total: number;
  readonly mode: string;
  readonly state: string;
  readonly left?: number;
  readonly score?: number;
  readonly reason?: string;
}

export interface RequestView {
  readonly time: string;
  readonly message: string | null;
  readonly agent: string | null;
  readonly delivery: string;
  readonly worktree: string;
  readonly pins: readonly string[];
  readonly files: readonly FileView[];
}

const text = (value: unknown, fallback: string): string => (typeof value === "string" ? value : fallback);
const count = (value: unknown): number | undefined => (typeof value === "number" && Number.isFinite(value) ? value : undefined);

/** A record as shown. parseRecords checks only `v`, `session` and that `files` is an array: a malformed file entry is left out. */
export function requestView(record: RequestRecord): RequestView {
  const files: FileView[] = [];
  for (const entry of record.files as readonly unknown[]) {
    if (typeof entry !== "object" || entry === null || !("path" in entry) || typeof entry.path !== "string") continue;
    const file = entry as Partial<Record<keyof FileView, unknown>>;
    const [left, score] = [count(file.left), count(file.score)];
    const reason = typeof file.reason === "string" ? file.reason : undefined;
    files.push({
      path: entry.path,
      sha256: text(file.sha256, ""),
      tokens: count(file.tokens) ?? 0,
      total: count(file.total) ?? 0,
      mode: text(file.mode, "?"),
      state: text(file.state, "?"),
      ...(left === undefined ? {} : { left }),
      ...(score === undefined ? {} : { score }),
      ...(reason === undefined ? {} : { reason }),
    });
  }
  const pins: unknown = record.pins;
  return {
    time: text(record.time, "?"),
    message: typeof record.message === "string" ? record.message : null,
    agent: typeof record.agent === "string" ? record.agent : null,
    delivery: text(record.delivery, "?"),
    worktree: text(record.worktree, ""),
    pins: Array.isArray(pins) ? pins.filter((pin): pin is string => typeof pin === "string") : [],
    files,
  };
}

/** What a request had differently from the one before it. */
export interface Changes {
  readonly added: readonly string[];
  readonly dropped: readonly string[];
  readonly states: readonly { readonly path: string; readonly from: string; readonly to: string }[];
  readonly modes: readonly { readonly path: string; readonly from: string; readonly to: string }[];
  /** Files whose bytes on disk had changed: another sha256. */
  readonly versions: readonly string[];
  readonly pinned: readonly string[];
  readonly unpinned: readonly string[];
}

/** The difference between two consecutive requests, each list in the order of `after` (dropped: of `before`). */
export function changesBetween(before: RequestView, after: RequestView): Changes {
  const previous = new Map(before.files.map((file) => [file.path, file]));
  const current = new Set(after.files.map((file) => file.path));
  const kept = after.files.flatMap((file) => {
    const old = previous.get(file.path);
    return old === undefined ? [] : [{ old, file }];
  });
  const pinsBefore = new Set(before.pins);
  const pinsAfter = new Set(after.pins);
  return {
    added: after.files.filter((file) => !previous.has(file.path)).map((file) => file.path),
    dropped: before.files.filter((file) => !current.has(file.path)).map((file) => file.path),
    states: kept.filter(({ old, file }) => old.state !== file.state).map(({ old, file }) => ({ path: file.path, from: old.state, to: file.state })),
    modes: kept.filter(({ old, file }) => old.mode !== file.mode).map(({ old, file }) => ({ path: file.path, from: old.mode, to: file.mode })),
    versions: kept.filter(({ old, file }) => old.sha256 !== file.sha256).map(({ file }) => file.path),
    pinned: after.pins.filter((pin) => !pinsBefore.has(pin)),
    unpinned: before.pins.filter((pin) => !pinsAfter.has(pin)),
  };
}

/** The last `last` requests (every one for "all"), with their numbers (1 = the oldest recorded). */
export function lastRequests<T>(requests: readonly T[], last: number | "all"): { number: number; request: T }[] {
  const from = last === "all" ? 0 : Math.max(0, requests.length - last);
  return requests.slice(from).map((request, i) => ({ number: from + i + 1, request }));
}

/**
 * How a file on disk differs now from a recorded version: undefined when its bytes hash the same.
 * Read contained in the record's worktree (as the plugin reads it, so a path with `..` or a symlink
 * leading out is never followed), with the plugin's default byte cap, which its hash covers.
 */
export function sinceRecorded(realWorktree: string, path: string, sha256: string): string | undefined {
  const candidate = join(realWorktree, path);
  const outcome = readContained(candidate, dirname(candidate), realWorktree, DEFAULT_OPTIONS.maxFileBytes);
  if (outcome.kind === "absent") return "deleted since";
  if (outcome.kind === "skip") return `unreadable since: ${outcome.skip.reason}`;
  return outcome.version.sha256 === sha256 ? undefined : "changed since";
}

interface SessionArgs {
  session: string;
  records: string | undefined;
  last: string | undefined;
  all: boolean;
  json: boolean;
}

/** `explain --session <id>`: 0 when requests were shown, 1 when the session has none readable, 2 on bad usage. */
function explainSession(args: SessionArgs): number {
  if (!isSessionId(args.session)) return usageError(`not a session id: ${terminalSafe(JSON.stringify(args.session))} (OpenCode's look like ses_...)`);
  if (args.last !== undefined && !/^[1-9][0-9]{0,8}$/.test(args.last)) return usageError(`--last takes a positive whole number (got ${terminalSafe(JSON.stringify(args.last))})`);
  if (args.last !== undefined && args.all) return usageError("--last and --all: choose one");
  const dir = resolve(args.records ?? defaultRecordsDir());
  const files = [recordsPath(dir, args.session, true), recordsPath(dir, args.session)].flatMap((path) => readRecordsFile(path) ?? []);
  if (files.length === 0) {
    console.error(notFound(dir, args.session));
    return 1;
  }
  const requests = files.flatMap((file) => file.records.map(requestView));
  const shown = lastRequests(requests, args.all ? "all" : Number(args.last ?? DEFAULT_LAST));
  const since = diskChanges(requests, shown.map(({ request }) => request));
  const report = { session: args.session, files, requests, shown, since };
  console.log(args.json ? terminalJson(sessionJson(report)) : renderSession(report));
  if (requests.length === 0) console.error(`explain: no request of session ${args.session} is readable in its records (see the notes above)`);
  return requests.length === 0 ? 1 : 0;
}

/** A file's last recorded hash, and how its bytes on disk differ from it now (undefined: they do not). */
interface Compared {
  readonly sha256: string;
  readonly status: string | undefined;
}

/** The session's files on disk, compared with their last recorded version: by worktree, then path. */
type DiskChanges = ReadonlyMap<string, ReadonlyMap<string, Compared>>;

/**
 * For each file of the shown requests, its last recorded hash (over ALL requests) and how the bytes
 * on disk now differ from it. A worktree that no longer resolves has no entry: nothing to compare with.
 */
function diskChanges(all: readonly RequestView[], shown: readonly RequestView[]): DiskChanges {
  const lastHash = new Map<string, Map<string, string>>();
  for (const request of all) {
    const byPath = lastHash.get(request.worktree) ?? new Map<string, string>();
    lastHash.set(request.worktree, byPath);
    for (const file of request.files) byPath.set(file.path, file.sha256);
  }
  const reals = new Map<string, string | undefined>();
  const result = new Map<string, Map<string, Compared>>();
  for (const request of shown) {
    if (!reals.has(request.worktree)) reals.set(request.worktree, realWorktree(request.worktree));
    const real = reals.get(request.worktree);
    if (real === undefined) continue;
    const byPath = result.get(request.worktree) ?? new Map<string, Compared>();
    result.set(request.worktree, byPath);
    for (const file of request.files) {
      if (byPath.has(file.path)) continue;
      const sha256 = lastHash.get(request.worktree)?.get(file.path) ?? file.sha256;
      byPath.set(file.path, { sha256, status: sinceRecorded(real, file.path, sha256) });
    }
  }
  return result;
}

function realWorktree(worktree: string): string | undefined {
  if (worktree === "") return undefined;
  try {
    return realpathSync.native(worktree);
  } catch {
    return undefined;
  }
}

/** The mark of a file line: only the last recorded version is compared (an older one's change shows as "new version" further on). */
function markOf(since: DiskChanges, worktree: string, file: FileView): string | undefined {
  const known = since.get(worktree)?.get(file.path);
  return known !== undefined && known.sha256 === file.sha256 ? known.status : undefined;
}

interface SessionReport {
  session: string;
  files: readonly RecordsFile[];
  requests: readonly RequestView[];
  shown: readonly { number: number; request: RequestView }[];
  since: DiskChanges;
}

function renderSession({ session, files, requests, shown, since }: SessionReport): string {
  const worktrees = [...new Set(requests.map((request) => request.worktree))];
  const missing = worktrees.filter((worktree) => !since.has(worktree) && shown.some(({ request }) => request.worktree === worktree));
  const lines = [
    `Session:   ${session}`,
    `Worktree:  ${worktrees.length === 0 ? "(unknown)" : worktrees.map(terminalSafe).join(", ")}`,
    `Requests:  ${requests.length}${shown.length < requests.length ? ` (the last ${shown.length} shown: --last N or --all for more)` : ""}`,
    ...files.map((file, i) => `${i === 0 ? "Records:   " : "           "}${terminalSafe(file.path)} (${size(file.bytes)}, ${counted(file.records.length, "request")})`),
    ...files.flatMap(notesOf),
    ...missing.map((worktree) => `Note: ${terminalSafe(worktree)} no longer exists here: its files are not compared with the disk`),
  ];
  shown.forEach(({ number, request }) => {
    const before = requests[number - 2];
    lines.push("", ...renderRequest(number, request, before === undefined ? undefined : changesBetween(before, request), since));
  });
  lines.push("", ...renderSince(since));
  return lines.join("\n");
}

function notesOf(file: RecordsFile): string[] {
  const name = terminalSafe(file.path);
  const notes: string[] = [];
  if (file.unreadBytes > 0) notes.push(`Note: ${name} is ${size(file.bytes)}; only its last ${size(file.bytes - file.unreadBytes)} were read (older requests left out)`);
  if (file.unreadable > 0) notes.push(`Note: ${name}: ${counted(file.unreadable, "unreadable line")} skipped (a line being written, or not a record)`);
  for (const [version, n] of file.otherVersions) {
    notes.push(`Note: ${name}: ${counted(n, "record")} of format version ${terminalSafe(version)} skipped (this explain reads version ${RECORDS_VERSION}: use the explain of the plugin version that wrote them)`);
  }
  return notes;
}

/** Path column width: the longest path of the request, but a freak path does not push every column off screen. */
const PATH_COLUMN_MAX = 60;

function renderRequest(number: number, request: RequestView, changes: Changes | undefined, since: DiskChanges): string[] {
  const title = [`#${number} ${request.time}`, `message ${request.message ?? "(none)"}`, `agent ${request.agent ?? "(none)"}`, `delivery ${request.delivery}`];
  const paths = request.files.map((file) => terminalSafe(file.path));
  const width = Math.min(PATH_COLUMN_MAX, Math.max(0, ...paths.map((path) => path.length)));
  const lines = [terminalSafe(title.join("  "))];
  if (request.pins.length > 0) lines.push(`  pins: ${request.pins.map(terminalSafe).join(", ")}`);
  if (request.files.length === 0) lines.push("  (no context files)");
  request.files.forEach((file, i) => {
    const mark = markOf(since, request.worktree, file);
    const columns = [
      (paths[i] ?? "").padEnd(width),
      terminalSafe(file.score === undefined ? file.mode : `${file.mode} ${Number(file.score.toFixed(3))}`).padEnd(12),
      terminalSafe(file.left === undefined ? file.state : `${file.state}, ${file.left} left`).padEnd(18),
      file.tokens === file.total ? counted(file.total, "token") : `${file.tokens} of ${counted(file.total, "token")}`,
    ];
    if (file.reason !== undefined) columns.push(`(${terminalSafe(file.reason)})`);
    if (mark !== undefined) columns.push(`[${terminalSafe(mark)}]`);
    lines.push(`  ${columns.join("  ")}`);
  });
  lines.push(`  changes: ${changes === undefined ? "(the first recorded request)" : describeChanges(changes)}`);
  return lines;
}

function describeChanges(changes: Changes): string {
  const list = (paths: readonly string[]) => paths.map(terminalSafe).join(", ");
  const parts = [
    changes.added.length > 0 ? `added ${list(changes.added)}` : "",
    changes.dropped.length > 0 ? `dropped ${list(changes.dropped)}` : "",
    ...changes.states.map(({ path, from, to }) => `${terminalSafe(path)} ${terminalSafe(from)} -> ${terminalSafe(to)}`),
    ...changes.modes.map(({ path, from, to }) => `${terminalSafe(path)} mode ${terminalSafe(from)} -> ${terminalSafe(to)}`),
    changes.versions.length > 0 ? `new version of ${list(changes.versions)}` : "",
    changes.pinned.length > 0 ? `pinned ${list(changes.pinned)}` : "",
    changes.unpinned.length > 0 ? `unpinned ${list(changes.unpinned)}` : "",
  ].filter((part) => part !== "");
  return parts.length === 0 ? "none" : parts.join("; ");
}

/** The files of the shown requests that are not on disk as last recorded; nothing when no worktree could be compared. */
function renderSince(since: DiskChanges): string[] {
  if (since.size === 0) return [];
  const changed = [...since.values()].flatMap((byPath) => [...byPath].flatMap(([path, { status }]) => (status === undefined ? [] : [`  ${terminalSafe(path)}  [${terminalSafe(status)}]`])));
  return changed.length === 0 ? ["On disk now: every file shown is as last recorded."] : ["On disk now, not as last recorded:", ...changed];
}

function sessionJson({ session, files, requests, shown, since }: SessionReport) {
  return {
    session,
    requests: requests.length,
    files: files.map((file) => ({
      path: file.path,
      bytes: file.bytes,
      requests: file.records.length,
      unreadBytes: file.unreadBytes,
      unreadableLines: file.unreadable,
      otherVersions: Object.fromEntries(file.otherVersions),
    })),
    shown: shown.map(({ number, request }) => {
      const before = requests[number - 2];
      return {
        number,
        ...request,
        files: request.files.map((file) => ({ ...file, since: markOf(since, request.worktree, file) ?? null })),
        changes: before === undefined ? null : changesBetween(before, request),
      };
    }),
  };
}

const counted = (n: number, noun: string) => `${n} ${noun}${n === 1 ? "" : "s"}`;

function size(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  return bytes < 1024 * 1024 ? `${(bytes / 1024).toFixed(1)} KB` : `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

/** The message for a session without records: where they are kept, and the sessions there, most recent first. */
function notFound(dir: string, session: string): string {
  const sessions = recordedSessions(dir);
  const head = `explain: no records of session ${session} in ${terminalSafe(dir)}`;
  const how = "The plugin writes one <session id>.jsonl there per session (plugin options recordsDir, records: false; --records <dir> reads another place).";
  if (sessions.length === 0) return `${head}\n${how}\nNo session has records there yet.`;
  const listed = sessions.slice(0, SESSIONS_LISTED).map(({ id, mtimeMs }) => `  ${id}  last written ${new Date(mtimeMs).toISOString()}`);
  const more = sessions.length > SESSIONS_LISTED ? [`  (${sessions.length - SESSIONS_LISTED} more)`] : [];
  return [head, how, "Sessions recorded there, most recent first:", ...listed, ...more].join("\n");
}

/** The session ids with a records file (current or rotated) in `dir`, most recently written first. */
export function recordedSessions(dir: string): { id: string; mtimeMs: number }[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const latest = new Map<string, number>();
  for (const name of names) {
    const id = name.replace(/(\.1)?\.jsonl$/, "");
    // Anything else there (a steering file, a stray name) is no session's records.
    if (id === name || !isSessionId(id)) continue;
    try {
      const { mtimeMs } = statSync(join(dir, name));
      latest.set(id, Math.max(mtimeMs, latest.get(id) ?? 0));
    } catch {
      // removed meanwhile
    }
  }
  return [...latest].map(([id, mtimeMs]) => ({ id, mtimeMs })).sort((a, b) => b.mtimeMs - a.mtimeMs || a.id.localeCompare(b.id));
}

if (import.meta.main) {
  process.exitCode = await runExplain(process.argv.slice(2)).catch((error) => {
    console.error(`explain: ${error instanceof Error ? error.message : String(error)}`);
    return 1;
  });
}
