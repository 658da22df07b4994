/**
 * Reading a session's records from the TUI, which runs apart from the plugin that writes them: only
 * the end of a file is read (its last record is all the TUI shows), whatever the file has become.
 * A missing, torn, foreign, symlinked or special file reads as no record; nothing here throws.
 */
import { isSessionId, parseRecords, parseSteer, readFrom, recordsPath, steerPath, type RequestRecord, type SteerRequest } from "../records/format.ts";

/** Bytes read from the end of a file first: a record is a few hundred bytes per file it lists. */
export const TAIL_BYTES = 256 * 1024;
/** Bytes read at most, for a record longer than the first tail (a session of thousands of files). */
export const MAX_TAIL_BYTES = 4 * 1024 * 1024;

export interface Tail {
  /** Complete lines only: a line cut by the start of the window is dropped. */
  readonly text: string;
  /** The window held the whole file. */
  readonly whole: boolean;
}

/** The last `bytes` bytes of a regular file, or undefined when there is no such file to read. */
export function readTail(path: string, bytes: number): Tail | undefined {
  let start = 0;
  let window: ReturnType<typeof readFrom>;
  try {
    window = readFrom(path, (size) => {
      start = size - Math.min(size, Math.max(0, bytes));
      // One byte before the window too: when it ends a line, the window's first line is whole.
      return start - 1;
    });
  } catch {
    return undefined; // a symlink, a FIFO, a directory: no record
  }
  if (window === undefined) return undefined;
  const text = window.bytes.toString("utf8");
  if (start === 0) return { text, whole: true };
  const firstBreak = text.indexOf("\n");
  return { text: firstBreak === -1 ? "" : text.slice(firstBreak + 1), whole: false };
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
