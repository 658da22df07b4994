import { closeSync, constants, fstatSync, openSync, readlinkSync, readSync, realpathSync, statSync, type Stats } from "node:fs";
import { relative } from "node:path";
import { sha256Hex } from "../hash.ts";
import { isInside } from "../paths.ts";
import { cutInsideFrontmatter, parseFrontmatter } from "./frontmatter.ts";
import { StoredVersion } from "./version.ts";

/** One version of one context file, as read from disk: never changed once made (see version.ts for how it keeps its text). */
export interface FileVersion {
  /** Real absolute path of the file read. */
  readonly path: string;
  /** Real directory it applies to. */
  readonly dir: string;
  /** `path` relative to the real worktree. */
  readonly rel: string;
  /** Decoded text as on disk (up to maxFileBytes): what a host copy is compared with. */
  readonly raw: string;
  /** Text without frontmatter. */
  readonly body: string;
  /** `{}` when none. */
  readonly frontmatter: Readonly<Record<string, unknown>>;
  /** Frontmatter `root: true`: nothing above `dir` applies. */
  readonly root: boolean;
  /** Of the bytes read. */
  readonly sha256: string;
  readonly size: number;
  readonly truncated: boolean;
  readonly mtimeMs: number;
  /** A version whose text the rules changed (imports, merging): the version on disk it came from. */
  readonly source?: FileVersion;
}

/** A candidate passed over, and why. */
export interface Skip {
  readonly path: string;
  readonly reason: string;
  /** The failure may pass (a permission, too many open files, an I/O error, a race): worth trying again. */
  readonly transient: boolean;
  /** It may pass with no change to the file or its directory, so no watch event would tell (too many open files, an I/O error). */
  readonly unannounced?: true;
  /** Bytes read before the refusal (its bytes are no text, or its frontmatter runs past the cap): what the read cost. */
  readonly read?: number;
}

/**
 * File timestamps come from the kernel's coarse clock (one tick: up to 10 ms), so a same-size write
 * within the tick of a read can leave every stat field unchanged. A file changed this recently when
 * it was read is read again (and compared by hash) at its next check, as git treats racy entries.
 */
export const RACY_MS = 50;

export type ReadOutcome =
  | {
      readonly kind: "file";
      readonly version: FileVersion;
      /** Problems worth a warning (frontmatter dropped, file cut). */
      readonly notes: readonly string[];
      /** The file's ctime when opened: a read this close to a change may have raced it. */
      readonly changedMs: number;
    }
  | { readonly kind: "skip"; readonly skip: Skip }
  | { readonly kind: "absent" };

/** Bytes read from a context file as text, or why they are not text. */
export type DecodedText = { readonly kind: "text"; readonly text: string } | { readonly kind: "refused"; readonly reason: string };

/** A read that did not get to the bytes: refused, or nothing there. */
export type Refusal = Extract<ReadOutcome, { readonly kind: "skip" | "absent" }>;

/** The first bytes of a contained file, with none of a version's work (no hash, no decoding). */
export type HeadOutcome = { readonly kind: "head"; readonly bytes: Uint8Array; readonly truncated: boolean } | Refusal;

const ABSENT: Refusal = Object.freeze({ kind: "absent" });

/** Errors that may pass on their own: the read is tried again at the next check. */
const TRANSIENT = new Set(["EACCES", "EPERM", "EMFILE", "ENFILE", "EIO", "EAGAIN", "EBUSY", "EINTR", "ENOMEM"]);
/** Of those, the ones that pass with nothing changed on disk (a permission comes back by a chmod, which a watch sees). */
const UNANNOUNCED = new Set(["EMFILE", "ENFILE", "EIO", "EAGAIN", "EBUSY", "EINTR", "ENOMEM"]);

/**
 * The open flags: never follow a symlink in the last component (the path opened is already resolved;
 * a link swapped in since fails with ELOOP) and never block (a FIFO swapped in would hang the read).
 */
const OPEN_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/** Linux names an open descriptor's file in /proc; elsewhere the fallback is realpath + dev/ino. */
let procFd = process.platform === "linux";

/**
 * Reads the context file candidate `candidate` (a name inside `dir`), contained in `realRoot` at read
 * time (see withContained). At most `maxFileBytes` are read (one more is asked for, to know the file
 * was cut). Synchronous on purpose: a local read of a small file is far cheaper than a trip to the
 * thread pool. A `transient` read (its version used once and let go) keeps the text unpacked.
 */
export function readContained(candidate: string, dir: string, realRoot: string, maxFileBytes: number, { transient = false } = {}): ReadOutcome {
  return withContained(candidate, realRoot, (fd, opened, info): ReadOutcome => {
    const { bytes, truncated } = readHead(fd, info.size, maxFileBytes);
    const text = decodeText(bytes, truncated);
    if (text.kind === "refused") return skip(candidate, text.reason, false, false, bytes.length);
    const raw = text.text;
    // Sent as text, such a file would show its frontmatter, and load whatever its mode says: left out.
    if (truncated && cutInsideFrontmatter(raw)) return skip(candidate, `its frontmatter runs past the first ${maxFileBytes} bytes (option maxFileBytes)`, false, false, bytes.length);
    const { body, frontmatter, error } = parseFrontmatter(raw);
    const notes: string[] = [];
    if (error !== undefined) notes.push(`its frontmatter was dropped unused (${error}); the rest of the file is used`);
    if (truncated) notes.push(`it is ${info.size} bytes; only the first ${maxFileBytes} are used (option maxFileBytes)`);
    const fields = { path: opened, dir, rel: relative(realRoot, opened), frontmatter, root: frontmatter.root === true, sha256: sha256Hex(bytes), size: info.size, truncated, mtimeMs: info.mtimeMs };
    const version = StoredVersion.read(fields, raw, body, !transient);
    return { kind: "file", version, notes, changedMs: info.ctimeMs };
  });
}

/**
 * The first `maxBytes` bytes of `candidate`, contained in `realRoot` as readContained's are (the same
 * checks, made the same way), for a caller that decides from a file's start whether to read it at
 * all: its frontmatter, say. The bytes are undecoded (see decodeText) and may contain anything.
 */
export function readContainedHead(candidate: string, realRoot: string, maxBytes: number): HeadOutcome {
  return withContained(candidate, realRoot, (fd, _opened, info): HeadOutcome => ({ kind: "head", ...readHead(fd, info.size, maxBytes) }));
}

/**
 * A context file's bytes as text, or why they are not: NUL bytes make it binary, and it must be valid
 * UTF-8, save for a character cut in two by the end of bytes read from a longer file (`truncated`).
 */
export function decodeText(bytes: Uint8Array, truncated: boolean): DecodedText {
  if (bytes.includes(0)) return { kind: "refused", reason: "binary (contains NUL bytes)" };
  try {
    // A fresh decoder when cut: `stream` keeps a character split by the cap from counting as invalid
    // (it is left out), and leaves state behind in the decoder.
    return { kind: "text", text: (truncated ? new TextDecoder("utf-8", { fatal: true }) : STRICT_UTF8).decode(bytes, { stream: truncated }) };
  } catch {
    return { kind: "refused", reason: "not valid UTF-8" };
  }
}

/**
 * Opens `candidate` contained in `realRoot` AT READ TIME, runs `use` on it and closes it. The
 * candidate is resolved (it may be a symlink to a file inside the worktree) and must resolve inside,
 * so that nothing outside is opened but in a race; the resolved path is opened without following
 * links, checked through its handle to be a regular file, and the path the OPENED DESCRIPTOR has
 * (every component, as of now) must lie inside the worktree. So a directory on the way swapped for a
 * symlink that leads out, at any moment before the open, is refused; one swapped after the open does
 * not matter, since the bytes come from the file that was checked. An error thrown by `use` is a
 * failed read.
 */
function withContained<T>(candidate: string, realRoot: string, use: (fd: number, opened: string, info: Stats) => T): T | Refusal {
  let resolved: string;
  try {
    resolved = realpathSync.native(candidate);
  } catch (error) {
    return failure(candidate, error, "could not resolve");
  }
  if (!isInside(resolved, realRoot)) return skip(candidate, `resolves outside the worktree (${resolved})`, false);
  let fd: number;
  try {
    fd = openSync(resolved, OPEN_FLAGS);
  } catch (error) {
    // ELOOP now means the last component became a symlink after it was resolved: a race, try again.
    if (code(error) === "ELOOP") return skip(candidate, "was replaced by a symlink while being opened", true);
    return failure(candidate, error, "could not open");
  }
  try {
    const info = fstatSync(fd);
    if (!info.isFile()) return skip(candidate, "not a regular file", false);
    const opened = openedPath(fd, resolved, info);
    if (opened === undefined) return skip(candidate, "changed while being opened", true);
    if (!isInside(opened, realRoot)) return skip(candidate, `resolves outside the worktree (${opened})`, false);
    return use(fd, opened, info);
  } catch (error) {
    return failure(candidate, error, "could not read");
  } finally {
    closeSync(fd);
  }
}

const STRICT_UTF8 = new TextDecoder("utf-8", { fatal: true });

/**
 * The real path of what `fd` is open on, or undefined when it cannot be told apart from a race.
 * Linux: the kernel's own answer (`/proc/self/fd/N`), which resolves every component as of now.
 * Elsewhere: resolve the path again and accept it only if it names the very file opened (dev + ino).
 */
export function openedPath(fd: number, resolved: string, opened: Stats): string | undefined {
  if (procFd) {
    try {
      const link = readlinkSync(`/proc/self/fd/${fd}`);
      // A file unlinked after the open keeps its last path with this suffix.
      return link.endsWith(" (deleted)") ? link.slice(0, -" (deleted)".length) : link;
    } catch {
      procFd = false;
    }
  }
  try {
    const again = realpathSync.native(resolved);
    const info = statSync(again);
    return info.dev === opened.dev && info.ino === opened.ino ? again : undefined;
  } catch {
    return undefined;
  }
}

/** At most `limit` bytes from the start of the file, and whether there was more. */
function readHead(fd: number, size: number, limit: number): { bytes: Uint8Array; truncated: boolean } {
  // One byte past the cap, so a file longer than the cap shows as cut. A file fstat says is shorter is
  // read to that size: one byte more would cost a read that only finds the end, and could not show
  // the file cut anyway (a file grown since fstat has to grow past the cap to be).
  const buffer = Buffer.allocUnsafe(size < limit ? size : limit + 1);
  let length = 0;
  while (length < buffer.length) {
    const read = readSync(fd, buffer, length, buffer.length - length, length);
    if (read === 0) break;
    length += read;
  }
  return { bytes: buffer.subarray(0, Math.min(length, limit)), truncated: length > limit };
}

function failure(candidate: string, error: unknown, doing: string): Refusal {
  const errno = code(error);
  // Absent, or gone on the way, or a dangling link: not a candidate at all.
  if (errno === "ENOENT" || errno === "ENOTDIR") return ABSENT;
  if (errno === "ELOOP") return skip(candidate, "symlink loop", false);
  const transient = errno === undefined || TRANSIENT.has(errno);
  return skip(candidate, `${doing} (${errno ?? String(error)})`, transient, errno === undefined || UNANNOUNCED.has(errno));
}

function skip(path: string, reason: string, transient: boolean, unannounced = false, read?: number): Refusal {
  const base = unannounced ? { path, reason, transient, unannounced } : { path, reason, transient };
  return { kind: "skip", skip: Object.freeze(read === undefined ? base : { ...base, read }) };
}

function code(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code;
}
