/**
 * Reading a session's records from the TUI, which runs apart from the plugin that writes them: only
 * the end of a file is read (its last record is all the TUI shows), whatever the file has become.
 * A missing, torn, foreign, symlinked or special file reads as no record; nothing here throws.
 */
import { closeSync, constants, fstatSync, openSync, readSync } from "node:fs";
import { isSessionId, parseRecords, parseSteer, recordsPath, steerPath, type RequestRecord, type SteerRequest } from "../records/format.ts";

/** Bytes read from the end of a file first: a record is a few hundred bytes per file it lists. */
export const TAIL_BYTES = 256 * 1024;
/** Bytes read at most, for a record longer than the first tail (a session of thousands of files). */
export const MAX_TAIL_BYTES = 4 * 1024 * 1024;

/** Never follow a symlink, never block on a FIFO: the records directory is not trusted to hold files only. */
const OPEN_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

export interface Tail {
  /** Complete lines only: a line cut by the start of the window is dropped. */
  readonly text: string;
  /** The window held the whole file. */
  readonly whole: boolean;
}

/** The last `bytes` bytes of a regular file, or undefined when there is no such file to read. */
export function readTail(path: string, bytes: number): Tail | undefined {
  let fd: number;
  try {
    fd = openSync(path, OPEN_FLAGS);
  } catch {
    return undefined;
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) return undefined;
    const start = stat.size - Math.min(stat.size, Math.max(0, bytes));
    // One byte before the window too: when it ends a line, the window's first line is whole.
    const from = Math.max(0, start - 1);
    const length = stat.size - from;
    const buffer = Buffer.alloc(length);
    let read = 0;
    while (read < length) {
      const got = readSync(fd, buffer, read, length - read, from + read);
      if (got === 0) break; // truncated since the stat
      read += got;
    }
    const text = buffer.toString("utf8", 0, read);
    if (start === 0) return { text, whole: true };
    const firstBreak = text.indexOf("\n");
    return { text: firstBreak === -1 ? "" : text.slice(firstBreak + 1), whole: false };
  } catch {
    return undefined;
  } finally {
    closeSync(fd);
  }
}

/** The last record of `session` in one file, reading a larger tail only while none is complete in it. */
function lastRecordIn(path: string, session: string): RequestRecord | undefined {
  for (let bytes = TAIL_BYTES; ; bytes *= 4) {
    const tail = readTail(path, bytes);
    if (tail === undefined) return undefined;
    const last = parseRecords(tail.text).findLast((record) => record.session === session);
    if (last !== undefined || tail.whole || bytes >= MAX_TAIL_BYTES) return last;
  }
}

/** The session's latest record: in its records file, else (just after a rotation) in the rotated one. */
export function latestRecord(dir: string, session: string): RequestRecord | undefined {
  if (!isSessionId(session)) return undefined;
  return lastRecordIn(recordsPath(dir, session), session) ?? lastRecordIn(recordsPath(dir, session, true), session);
}

/** The session's recent steering requests, oldest first (the end of the file: older ones were applied long ago). */
export function recentSteers(dir: string, session: string): SteerRequest[] {
  if (!isSessionId(session)) return [];
  return parseSteer(readTail(steerPath(dir, session), TAIL_BYTES)?.text ?? "");
}

const RECORD_FILE = /^(.+?)(?:\.1|\.steer)?\.jsonl$/;

/** The session a file of the records directory belongs to (records, rotated records, steering), if any. */
export function sessionOfFile(name: string): string | undefined {
  const session = RECORD_FILE.exec(name)?.[1];
  return isSessionId(session) ? session : undefined;
}
