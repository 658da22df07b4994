import type { FileHandle } from "node:fs/promises";
import { fsPromises } from "../libraries.ts";
import type { Logger } from "../log.ts";
import { isHighSurrogate, isLowSurrogate } from "../strings.ts";
import { APPEND_FLAGS, MAX_RECORDS_BYTES, recordsPath, steerPath } from "./format.ts";


/**
 * A line given in parts, written as `open`, the items joined by commas, `close`: a record of a
 * 2,000-file hierarchy is about 540 KB, and the same line as one string was made three times over
 * (the list, the line, the line and its newline) before being encoded once more to be written. Its
 * items are the session's cached entries: the parts cost no new text.
 */
export interface LineParts {
  readonly open: string;
  readonly items: readonly string[];
  readonly close: string;
}

/** Lines waiting at most; past it (a stalled disk) the oldest wait is given up, with one warning. */
const MAX_PENDING = 1024;
/**
 * Under steady work the queue is written once it holds this many lines, or this long after its first
 * line, whichever comes first: a line keeps its request's snapshot of the hierarchy (2,000 files in a
 * large session) alive until it is made, and a second of them raised the cost benchmark's RSS.
 */
const DEFER_LINES = 8;
const MAX_DEFER_MS = 1000;
/** While the steps are busy, how often the queue's length is looked at (ms). */
const BUSY_POLL_MS = 10;

/**
 * Appends records off the step: `append` only queues a function that makes the line, and a later
 * event-loop task makes and writes it, once `quietIn` says the steps leave the loop alone (or see
 * DEFER_LINES), so a step never waits on JSON or the disk, nor for a turn of the loop they took. One
 * writer per process; lines of one session are written in order. Past MAX_RECORDS_BYTES a session's file is
 * renamed to `<id>.1.jsonl` (the previous one replaced): a session keeps at most twice that.
 */
export class RecordsWriter {
  /** A line to write, or (no line) a deleted session's files to remove. */
  private readonly pending: { session: string; line?: () => string | LineParts }[] = [];
  /** Sessions deleted lately: a step still in flight must not write their file again. */
  private readonly forgotten = new Set<string>();
  /** The task writing the queue, while there is one, and the timer that starts it (in a task after the step's; a flush starts it at once). */
  private draining: Promise<void> | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private start: (() => void) | undefined;
  private madeDir = false;
  private closed = false;

  constructor(
    readonly dir: string,
    private readonly log: Logger,
    /** Milliseconds until the steps leave the event loop alone (0: now). */
    private readonly quietIn: () => number = () => 0,
  ) {}

  append(session: string, line: () => string | LineParts): void {
    if (this.closed || this.forgotten.has(session)) return;
    if (this.pending.length >= MAX_PENDING) {
      this.pending.shift();
      this.log.once("records:overflow", "warn", `records: the disk does not keep up, older records were dropped (${this.dir})`);
    }
    this.pending.push({ session, line });
    this.schedule();
  }

  private schedule(): void {
    if (this.draining !== undefined) return;
    const latest = performance.now() + MAX_DEFER_MS;
    this.draining = new Promise<void>((resolve) => {
      this.start = resolve;
      const after = (ms: number) => {
        this.timer = setTimeout(() => {
          const wait = this.quietIn();
          if (wait > 0 && performance.now() < latest && this.pending.length < DEFER_LINES) after(Math.min(wait, BUSY_POLL_MS, latest - performance.now()));
          else resolve();
        }, ms);
        // Records never keep a finished process alive: dispose flushes them.
        this.timer.unref?.();
      };
      after(0);
    }).then(() => this.drain());
  }

  /** A deleted session: its queued lines are dropped and its records and steering file removed. */
  forget(session: string): void {
    if (this.closed) return;
    for (let i = this.pending.length - 1; i >= 0; i--) if (this.pending[i]!.session === session) this.pending.splice(i, 1);
    if (this.forgotten.size >= 1024) this.forgotten.delete(this.forgotten.values().next().value!);
    this.forgotten.add(session);
    this.pending.push({ session });
    this.schedule();
  }

  /** Resolves when every queued record is written (tests, and dispose). */
  async flush(): Promise<void> {
    while (this.draining !== undefined) {
      clearTimeout(this.timer);
      this.start?.();
      await this.draining;
    }
  }

  async close(): Promise<void> {
    await this.flush();
    this.closed = true;
  }

  private async drain(): Promise<void> {
    try {
      while (this.pending.length > 0) {
        const { session, line } = this.pending.shift()!;
        try {
          if (line === undefined) {
            await this.remove(session);
            continue;
          }
          // One line a write: the rotation is decided line by line, so a session's file never passes the bound by a backlog.
          await this.write(session, encodeLine(line()));
        } catch (error) {
          this.log.once(`records:${String(error)}`, "warn", `records: could not write a record of session ${session} to ${this.dir}: ${String(error)}`);
        }
      }
    } finally {
      this.draining = undefined;
      this.start = undefined;
    }
  }

  private async remove(session: string): Promise<void> {
    const { rm } = await fsPromises();
    await Promise.all([recordsPath(this.dir, session), recordsPath(this.dir, session, true), steerPath(this.dir, session)].map((path) => rm(path, { force: true })));
  }

  private async write(session: string, bytes: Buffer): Promise<void> {
    try {
      await this.appendBytes(session, bytes);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
      // The directory went (a state directory cleared by hand, say): made again, once, or no record would ever be written again.
      this.madeDir = false;
      await this.appendBytes(session, bytes);
    }
  }

  private async appendBytes(session: string, bytes: Buffer): Promise<void> {
    const path = recordsPath(this.dir, session);
    const { mkdir, rename } = await fsPromises();
    if (!this.madeDir) {
      await mkdir(this.dir, { recursive: true, mode: 0o700 });
      this.madeDir = true;
    }
    let file = await openRecordsFile(path);
    try {
      // The size as opened decides the rotation: the line goes to a new file when this one would pass the bound.
      if (file.size > 0 && file.size + bytes.length > MAX_RECORDS_BYTES) {
        await file.handle.close();
        await rename(path, recordsPath(this.dir, session, true));
        file = await openRecordsFile(path);
      }
      await appendWhole(file.handle, bytes);
    } finally {
      await file.handle.close().catch(() => {});
    }
  }
}

/**
 * A session's records file, opened to append: never through a symlink, never blocking on a FIFO, and
 * only a regular file (the records directory is not trusted to hold files only, as readFrom says), so
 * a link planted at `<id>.jsonl` cannot have records written elsewhere, nor a FIFO stall every
 * session's records and the plugin's dispose.
 */
async function openRecordsFile(path: string): Promise<{ handle: FileHandle; size: number }> {
  const { open } = await fsPromises();
  const handle = await open(path, APPEND_FLAGS, 0o600);
  try {
    const info = await handle.stat();
    if (!info.isFile()) throw new Error(`${path} is not a regular file`);
    return { handle, size: info.size };
  } catch (error) {
    await handle.close().catch(() => {});
    throw error;
  }
}

/**
 * Appends every byte of `bytes`, or none: a write cut short (a full disk) leaves no part of a line
 * behind, or the next record would be appended to it and both be lost to a reader.
 */
async function appendWhole(handle: FileHandle, bytes: Buffer): Promise<void> {
  let written = 0;
  try {
    while (written < bytes.length) {
      const { bytesWritten } = await handle.write(bytes, written, bytes.length - written);
      if (bytesWritten <= 0) throw new Error(`could not write a record (${written} of ${bytes.length} bytes written)`);
      written += bytesWritten;
    }
  } catch (error) {
    if (written > 0) {
      // What this write added is the file's last `written` bytes (appends are whole writes at its end).
      const { size } = await handle.stat();
      await handle.truncate(size - written).catch(() => {});
    }
    throw error;
  }
}

/**
 * A line and its newline as UTF-8, encoded straight into one buffer of its size, part by part as the
 * joined line would be: a surrogate pair split between two parts (a lone high surrogate ending one, a
 * lone low surrogate starting the next) is joined first, or each half would become U+FFFD. JSON.stringify
 * never leaves a lone surrogate in a record's parts; the writer does not rely on it.
 */
function encodeLine(line: string | LineParts): Buffer {
  const parts: string[] = [];
  const add = (part: string) => {
    if (part === "") return;
    const last = parts.length - 1;
    if (last >= 0 && isHighSurrogate(parts[last]!.charCodeAt(parts[last]!.length - 1)) && isLowSurrogate(part.charCodeAt(0))) parts[last] += part;
    else parts.push(part);
  };
  if (typeof line === "string") add(line);
  else {
    add(line.open);
    line.items.forEach((item, i) => {
      if (i > 0) add(",");
      add(item);
    });
    add(line.close);
  }
  add("\n");
  let size = 0;
  for (const part of parts) size += Buffer.byteLength(part);
  const bytes = Buffer.allocUnsafe(size);
  let at = 0;
  for (const part of parts) at += bytes.write(part, at);
  return bytes;
}
