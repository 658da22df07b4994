/**
 * The per-request records: one JSON line per main-session step in `<recordsDir>/<sessionID>.jsonl`,
 * and the steering requests a TUI (which runs apart from the server plugin) leaves for a session in
 * `<recordsDir>/<sessionID>.steer.jsonl`. This file is the interface between the plugin, `explain
 * --session` and the TUI module: plain Node APIs only, no file text ever (paths, hashes, counts).
 */
import { closeSync, constants, fstatSync, mkdirSync, openSync, readFileSync, readSync } from "node:fs";
import { homedir } from "node:os";
import { isAbsolute, join, resolve } from "node:path";
import { writeWhole } from "../files/write.ts";

export const RECORDS_VERSION = 1;
/** Past this size a session's records file is rotated to `<id>.1.jsonl` (one previous file kept). */
export const MAX_RECORDS_BYTES = 1024 * 1024;

/** How a file came to be in the session. */
export type IncludeMode = "touched" | "always" | "manual" | "agent";

/**
 * What the request had of a file:
 * - system: whole in the plugin's system block; cut: in it with `left` tokens left out;
 * - conversation: whole in a tool output or user message the request still carries;
 * - host: OpenCode's own prompt or read reminder carries it;
 * - omitted: named only (the budget), sent when a later call reaches it;
 * - unloaded: taken out with `project_context unload` until touched again.
 */
export type FileState = "system" | "cut" | "conversation" | "host" | "omitted" | "unloaded";

export interface FileRecord {
  /** Worktree-relative. */
  readonly path: string;
  /** Of the file's bytes on disk at this step. */
  readonly sha256: string;
  /** Tokens of its text the request carries (the plugin's copy; 0 when omitted or the host's). */
  readonly tokens: number;
  /** Tokens of the whole file. */
  readonly total: number;
  readonly mode: IncludeMode;
  /** Where it sits: the directory of a touch (direct), above one (parent), the worktree root (root). */
  readonly level: "root" | "parent" | "direct" | "other";
  readonly state: FileState;
  /** cut: tokens left out. */
  readonly left?: number;
  /** agent: the ranking score that attached it. */
  readonly score?: number;
  /** Why it is in this state, when that is not obvious (a budget, a pin, an override). */
  readonly reason?: string;
}

export interface RequestRecord {
  readonly v: typeof RECORDS_VERSION;
  /** ISO 8601. */
  readonly time: string;
  readonly session: string;
  /** The id of the user message the step answers, when known. */
  readonly message: string | null;
  readonly agent: string | null;
  readonly delivery: "stable" | "system";
  /** Real path of the worktree the relative paths are relative to. */
  readonly worktree: string;
  /** Worktree-relative paths pinned to the session (files or directories). */
  readonly pins: readonly string[];
  readonly files: readonly FileRecord[];
}

/** A TUI's request to the session's plugin, applied at the session's next step. */
export interface SteerRequest {
  readonly v: typeof RECORDS_VERSION;
  readonly time: string;
  readonly action: "load" | "unload";
  /** Worktree-relative or absolute. */
  readonly path: string;
}

/**
 * JSON.stringify, with every `$` and backquote written as its \u escape (the same JSON to any
 * parser): a record holds names the repository chose (a directory named `$(curl …|sh)`), and
 * `recordsDir` may be set by a project's opencode.json, to a directory a shell sources every file of
 * (Fedora's ~/.bashrc sources ~/.bashrc.d/*). A line is one word to a shell, its strings double-quoted,
 * so without `$` and backquotes no name in it runs.
 */
export function recordJson(value: unknown): string {
  return JSON.stringify(value).replace(/[$`]/g, (char) => (char === "$" ? "\\u0024" : "\\u0060"));
}

/** `$XDG_STATE_HOME/opencode-project-context`, else `~/.local/state/opencode-project-context` (a relative value of either is ignored, as the XDG spec says: it would be taken from wherever OpenCode runs). */
export function defaultRecordsDir(env: NodeJS.ProcessEnv = process.env): string {
  const xdg = env.XDG_STATE_HOME;
  return join(xdg !== undefined && isAbsolute(xdg) ? xdg : join(homeOf(env), ".local", "state"), "opencode-project-context");
}

/** $HOME when it is an absolute path, else the account's home directory. */
function homeOf(env: NodeJS.ProcessEnv): string {
  return env.HOME !== undefined && isAbsolute(env.HOME) ? env.HOME : homedir();
}

/**
 * The records directory the option `recordsDir` names, for the server plugin and the TUI alike: "" is
 * the default; `~` and `~/…` are the home directory (a shell would expand them, OpenCode's config does
 * not); any other relative path is refused, with the default used instead (it would land in whatever
 * directory OpenCode runs in, usually the project).
 */
export function recordsDirOf(option: string, env: NodeJS.ProcessEnv = process.env): { readonly dir: string; readonly problem?: string } {
  if (option === "") return { dir: defaultRecordsDir(env) };
  if (option === "~" || option.startsWith("~/")) return { dir: join(homeOf(env), option.slice(1)) };
  if (isAbsolute(option)) return { dir: resolve(option) };
  return { dir: defaultRecordsDir(env), problem: `option "recordsDir" ${JSON.stringify(option)} is relative (give an absolute path, or one that starts with ~/); using ${defaultRecordsDir(env)}` };
}

/** OpenCode's session ids are `ses_` and base62; anything else would name a path, and is refused. */
export function isSessionId(id: unknown): id is string {
  return typeof id === "string" && /^[A-Za-z0-9_-]{1,128}$/.test(id);
}

export function recordsPath(dir: string, session: string, rotated = false): string {
  if (!isSessionId(session)) throw new Error(`not a session id: ${JSON.stringify(session)}`);
  return join(dir, rotated ? `${session}.1.jsonl` : `${session}.jsonl`);
}

export function steerPath(dir: string, session: string): string {
  if (!isSessionId(session)) throw new Error(`not a session id: ${JSON.stringify(session)}`);
  return join(dir, `${session}.steer.jsonl`);
}

/** The lines of `text` that are records of this format; a torn last line or a foreign line is skipped. */
export function parseRecords(text: string): RequestRecord[] {
  return parseLines(text, (value): value is RequestRecord => {
    const record = value as Partial<RequestRecord> | null;
    return record?.v === RECORDS_VERSION && typeof record.session === "string" && Array.isArray(record.files);
  });
}

/** The JSON lines of `text` that `accept` takes: a line being written, or not ours, is skipped. */
function parseLines<T>(text: string, accept: (value: unknown) => value is T): T[] {
  const found: T[] = [];
  for (const line of text.split("\n")) {
    if (line === "") continue;
    try {
      const value: unknown = JSON.parse(line);
      if (accept(value)) found.push(value);
    } catch {
      // a line being written, or not ours
    }
  }
  return found;
}

/** A session's records, oldest first (the rotated file, then the current one); none when there are no files. */
export function readRecords(dir: string, session: string): RequestRecord[] {
  const read = (path: string) => {
    try {
      return readFileSync(path, "utf8");
    } catch {
      return "";
    }
  };
  return [...parseRecords(read(recordsPath(dir, session, true))), ...parseRecords(read(recordsPath(dir, session)))];
}

export function parseSteer(text: string): SteerRequest[] {
  return parseLines(text, (value): value is SteerRequest => {
    const request = value as Partial<SteerRequest> | null;
    return request?.v === RECORDS_VERSION && (request.action === "load" || request.action === "unload") && typeof request.path === "string" && typeof request.time === "string";
  });
}

/**
 * How the records and steering files are opened to append: made when absent, never through a symlink
 * (a line written elsewhere), never blocking on a FIFO; the caller then checks it is a regular file.
 */
export const APPEND_FLAGS = constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/** Bytes of a file's start that, with its inode, tell it from another made under the same name. */
const IDENTITY_BYTES = 64;

/**
 * The bytes of a regular file from `fromOf(size, file)` to its end, read by position, and which file
 * it was (`file`); undefined when there is no file. Never follows a symlink nor blocks on a FIFO (the
 * records directory is not trusted to hold files only): a symlink throws, as does anything that is
 * not a regular file, and I/O errors.
 */
export function readFrom(path: string, fromOf: (size: number, file: string) => number): { bytes: Buffer; from: number; file: string } | undefined {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
  try {
    const info = fstatSync(fd);
    if (!info.isFile()) throw new Error("not a regular file");
    const size = info.size;
    // Which file this is: its device and inode, and its first bytes (a file made again under the same
    // name may get the freed inode back at once, as ext4 gives it; a steering line starts with its time).
    const head = Buffer.alloc(Math.min(size, IDENTITY_BYTES));
    const headRead = head.length === 0 ? 0 : readSync(fd, head, 0, head.length, 0);
    const file = `${info.dev}:${info.ino}:${head.subarray(0, headRead).toString("latin1")}`;
    const from = Math.min(size, Math.max(0, fromOf(size, file)));
    const bytes = Buffer.alloc(size - from);
    let read = 0;
    while (read < bytes.length) {
      const got = readSync(fd, bytes, read, bytes.length - read, from + read);
      if (got === 0) break; // truncated since the stat
      read += got;
    }
    return { bytes: bytes.subarray(0, read), from, file };
  } finally {
    closeSync(fd);
  }
}

/**
 * Appends one steering request (the TUI's side); one short line, so the append is atomic. Opened as
 * readFrom opens: never through a symlink (a request written elsewhere), never blocking on a FIFO (a
 * TUI that hangs), and only into a regular file. Each request starts on a line of its own: one cut
 * short before it (a full disk) is ended there rather than taken back, which could take another
 * TUI's request appended meanwhile with it, and the reader skips the fragment.
 */
export function appendSteer(dir: string, session: string, action: SteerRequest["action"], path: string): void {
  const request: SteerRequest = { v: RECORDS_VERSION, time: new Date().toISOString(), action, path };
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const fd = openSync(steerPath(dir, session), APPEND_FLAGS, 0o600);
  try {
    if (!fstatSync(fd).isFile()) throw new Error("not a regular file");
    writeWhole(fd, Buffer.from(`\n${recordJson(request)}\n`, "utf8"));
  } finally {
    closeSync(fd);
  }
}
