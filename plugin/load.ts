import { constants, type Stats } from "node:fs";
import { lstat, open, realpath } from "node:fs/promises";
import { join } from "node:path";
import { parseFrontmatter } from "./frontmatter.ts";
import { isInside } from "./paths.ts";

/** One version of one context file, as read from disk. */
export interface ContextFile {
  /** Real absolute path (symlinks resolved). */
  path: string;
  /** The directory it applies to. */
  dir: string;
  /** Text without frontmatter. */
  body: string;
  /** `root: true` in its frontmatter. */
  root: boolean;
  /** Bytes on disk, and whether only the first `maxFileBytes` of them were read. */
  size: number;
  cutAtBytes: boolean;
  /** When the version read was written: names it in log messages. */
  mtimeMs: number;
  /** Why its frontmatter was ignored, if it was. */
  frontmatterError?: string;
}

export type Skip = {
  path: string;
  reason: string;
  /** The failure may pass (a permission, too many open files, an I/O error): worth trying again. */
  transient?: boolean;
};

export interface LoadResult {
  file: ContextFile | null;
  /** Candidates passed over, with why: a directory named AGENTS.md, a binary file, a symlink out of the worktree… */
  skipped: Skip[];
}

export interface LoadSettings {
  realRoot: string;
  fileNames: readonly string[];
  maxFileBytes: number;
}

/**
 * The context file of one directory: the first name of `fileNames` that is a readable UTF-8 text
 * file whose real path lies inside the worktree. A candidate that fails those tests is skipped (and
 * reported), and the next name is tried, so a broken AGENTS.md does not hide a good CLAUDE.md.
 */
export async function loadContextFile(dir: string, settings: LoadSettings): Promise<LoadResult> {
  const skipped: Skip[] = [];
  for (const name of settings.fileNames) {
    const candidate = join(dir, name);
    try {
      const link = await lstat(candidate);
      const real = link.isSymbolicLink() ? await realpath(candidate) : candidate;
      if (!isInside(real, settings.realRoot)) {
        skipped.push({ path: candidate, reason: `symlink resolves outside the worktree (${real})` });
        continue;
      }
      const read = await readHead(real, settings.maxFileBytes);
      if (read === undefined) {
        skipped.push({ path: candidate, reason: "not a regular file" });
        continue;
      }
      const { info } = read;
      if (read.bytes.includes(0)) {
        skipped.push({ path: candidate, reason: "binary (contains NUL bytes)" });
        continue;
      }
      let text: string;
      try {
        // `stream` keeps a multi-byte character split by the size cap from counting as invalid;
        // it leaves state behind in the decoder, hence a fresh one each time.
        text = new TextDecoder("utf-8", { fatal: true }).decode(read.bytes, { stream: read.cut });
      } catch {
        skipped.push({ path: candidate, reason: "not valid UTF-8" });
        continue;
      }
      const { body, root, error } = await parseFrontmatter(text);
      return {
        skipped,
        file: {
          path: real,
          dir,
          body,
          root,
          size: info.size,
          cutAtBytes: read.cut,
          mtimeMs: info.mtimeMs,
          ...(error === undefined ? {} : { frontmatterError: error }),
        },
      };
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      // Absent (or gone between lstat and read, or a dangling/looping link): not a candidate.
      if (code === "ENOENT" || code === "ENOTDIR") continue;
      if (code === "ELOOP") {
        skipped.push({ path: candidate, reason: "symlink loop" });
        continue;
      }
      skipped.push({ path: candidate, reason: `unreadable (${code ?? String(error)})`, transient: true });
    }
  }
  return { file: null, skipped };
}

/**
 * Reads at most `limit` bytes, so a 50 MB file costs no more memory than the cap; undefined for
 * anything but a regular file. What is read is what was checked: the file is opened without
 * following a symlink (one swapped in since the realpath fails) and without blocking (a FIFO swapped
 * in would hang the read), then checked through its own handle. One byte past the size is asked for,
 * to learn whether the file holds more than was read.
 */
async function readHead(path: string, limit: number): Promise<{ bytes: Uint8Array; cut: boolean; info: Stats } | undefined> {
  const handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  try {
    const info = await handle.stat();
    if (!info.isFile()) return undefined;
    const buffer = new Uint8Array(Math.min(info.size, limit) + 1);
    let length = 0;
    while (length < buffer.length) {
      const { bytesRead } = await handle.read(buffer, length, buffer.length - length, length);
      if (bytesRead === 0) break;
      length += bytesRead;
    }
    const cut = length > limit;
    return { bytes: buffer.subarray(0, Math.min(length, limit)), cut, info };
  } finally {
    await handle.close();
  }
}
