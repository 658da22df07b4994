import { afterEach, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { appendFileSync, mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { appendSteer, RECORDS_VERSION, recordsPath, type FileRecord, type RequestRecord } from "../../plugin/records/format.ts";
import { latestRecord, MAX_TAIL_BYTES, readTail, recentSteers, sessionOfFile, TAIL_BYTES } from "../../plugin/tui/read.ts";
import { SETTLE_MS, watchRecords } from "../../plugin/tui/watch.ts";

const SESSION = "ses_tui1";
const made: string[] = [];
const scratch = () => {
  const dir = mkdtempSync(join(tmpdir(), "pc-tui-"));
  made.push(dir);
  return dir;
};
afterEach(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function record(step: number, files = 1, session = SESSION): RequestRecord {
  const entries: FileRecord[] = Array.from({ length: files }, (_, index) => ({
    path: `packages/p${index}/AGENTS.md`,
    sha256: "0".repeat(64),
    tokens: step,
    total: step,
    mode: "touched",
    level: "direct",
    state: "system",
  }));
  return { v: RECORDS_VERSION, time: new Date(Date.UTC(2026, 0, 1, 0, 0, step)).toISOString(), session, message: null, agent: "build", delivery: "stable", worktree: "/repo", pins: [], files: entries };
}
const line = (value: unknown) => `${JSON.stringify(value)}\n`;

/** Polls `condition` until it holds, at most `ms`. */
async function until(condition: () => boolean, what: string, ms = 5000) {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe("readTail", () => {
  test("whole small files; only complete lines of a window into a large one", () => {
    const dir = scratch();
    const path = join(dir, "f");
    writeFileSync(path, "one\ntwo\n");
    expect(readTail(path, 100)).toEqual({ text: "one\ntwo\n", whole: true });
    expect(readTail(path, 5)).toEqual({ text: "two\n", whole: false }); // "\ntwo\n": the break before "two" ends the dropped part
    // A window that starts a line keeps it (found in review: it was dropped as if cut).
    expect(readTail(path, 4)).toEqual({ text: "two\n", whole: false });
    expect(readTail(path, 6)).toEqual({ text: "two\n", whole: false }); // "o\ntwo\n": the cut "o" is dropped
    expect(readTail(path, 2)).toEqual({ text: "", whole: false });
    // A multi-byte character cut by the window's start is in the dropped partial line.
    writeFileSync(path, "路径路径\nok\n");
    expect(readTail(path, 5)).toEqual({ text: "ok\n", whole: false });
  });

  test("no file, a directory, a symlink and a FIFO all read as nothing, at once", () => {
    const dir = scratch();
    writeFileSync(join(dir, "target"), line(record(1)));
    symlinkSync(join(dir, "target"), join(dir, "link"));
    mkdirSync(join(dir, "sub"));
    expect(spawnSync("mkfifo", [join(dir, "fifo")]).status).toBe(0);
    for (const name of ["missing", "sub", "link", "fifo"]) expect(readTail(join(dir, name), TAIL_BYTES)).toBeUndefined();
  });
});

describe("latestRecord", () => {
  test("the last record of the session, past torn, foreign and other sessions' lines", () => {
    const dir = scratch();
    const path = recordsPath(dir, SESSION);
    writeFileSync(path, line(record(1)) + line(record(2)) + "not json\n" + line({ v: 99, session: SESSION, files: [] }) + line(record(9, 1, "ses_other")) + '{"v":1,"session":"ses_tui1","fi');
    expect(latestRecord(dir, SESSION)?.time).toBe(record(2).time);
  });

  test("a record longer than the first window is found in a larger one; a file of garbage ends the search", () => {
    const dir = scratch();
    const big = record(7, 3000); // ~600 KB on one line
    expect(line(big).length).toBeGreaterThan(TAIL_BYTES);
    writeFileSync(recordsPath(dir, SESSION), line(record(1)) + line(big));
    expect(latestRecord(dir, SESSION)?.files).toHaveLength(3000);

    writeFileSync(recordsPath(dir, SESSION), "x".repeat(MAX_TAIL_BYTES * 2));
    const started = performance.now();
    expect(latestRecord(dir, SESSION)).toBeUndefined();
    expect(performance.now() - started).toBeLessThan(2000);
  });

  test("a huge file: only its end is read", () => {
    const dir = scratch();
    const path = recordsPath(dir, SESSION);
    const chunk = Array.from({ length: 2000 }, (_, index) => line(record(index % 50, 3))).join("");
    for (let written = 0; written < 32 * 1024 * 1024; written += chunk.length) appendFileSync(path, chunk);
    appendFileSync(path, line(record(59, 3)));
    const started = performance.now();
    expect(latestRecord(dir, SESSION)?.time).toBe(record(59).time);
    expect(performance.now() - started).toBeLessThan(200);
  });

  test("just after a rotation the previous file holds the latest record; no file, no record; a bad id reads nothing", () => {
    const dir = scratch();
    writeFileSync(recordsPath(dir, SESSION), line(record(3)));
    renameSync(recordsPath(dir, SESSION), recordsPath(dir, SESSION, true));
    expect(latestRecord(dir, SESSION)?.time).toBe(record(3).time);
    writeFileSync(recordsPath(dir, SESSION), "");
    expect(latestRecord(dir, SESSION)?.time).toBe(record(3).time);
    appendFileSync(recordsPath(dir, SESSION), line(record(4)));
    expect(latestRecord(dir, SESSION)?.time).toBe(record(4).time);
    expect(latestRecord(dir, "ses_none")).toBeUndefined();
    for (const bad of ["../x", "", "a/b", "ses\u0000", "x".repeat(200)]) expect(latestRecord(dir, bad)).toBeUndefined();
    expect(latestRecord(join(dir, "missing-dir"), SESSION)).toBeUndefined();
  });

  test("steering requests written with the format's own writer read back", () => {
    const dir = scratch();
    appendSteer(dir, SESSION, "load", "packages/api/AGENTS.md");
    appendSteer(dir, SESSION, "unload", "../outside");
    expect(recentSteers(dir, SESSION).map((steer) => [steer.action, steer.path])).toEqual([
      ["load", "packages/api/AGENTS.md"],
      ["unload", "../outside"],
    ]);
    expect(recentSteers(dir, "../x")).toEqual([]);
  });
});

describe("sessionOfFile", () => {
  test("records, rotated records and steering files name their session; nothing else does", () => {
    expect(["ses_a.jsonl", "ses_a.1.jsonl", "ses_a.steer.jsonl"].map(sessionOfFile)).toEqual(["ses_a", "ses_a", "ses_a"]);
    expect(["ses_a.json", ".jsonl", "a.b.jsonl", "../x.jsonl", "ses_a.jsonl.tmp", "x y.jsonl"].map(sessionOfFile)).toEqual([undefined, undefined, undefined, undefined, undefined, undefined]);
    const id = fc.stringMatching(/^[A-Za-z0-9_-]{1,128}$/);
    fc.assert(fc.property(id, fc.constantFrom(".jsonl", ".1.jsonl", ".steer.jsonl"), (session, suffix) => expect(sessionOfFile(session + suffix)).toBe(session)));
  });
});

describe("watchRecords", () => {
  test("a burst of changes to a session's files is reported once, after it settles; other files are ignored", async () => {
    const dir = join(scratch(), "records"); // not there yet: the watch makes it
    const seen: string[] = [];
    const watch = watchRecords(dir, (session) => seen.push(session));
    try {
      expect(watch.watching).toBe(true);
      writeFileSync(join(dir, "notes.txt"), "x");
      for (let step = 1; step <= 5; step++) appendFileSync(recordsPath(dir, SESSION), line(record(step)));
      appendSteer(dir, "ses_other", "load", "a");
      await until(() => seen.length >= 2, "both sessions reported");
      await new Promise((resolve) => setTimeout(resolve, SETTLE_MS * 4)); // nothing more comes
      expect(seen.sort()).toEqual(["ses_other", SESSION]);
    } finally {
      watch.close();
    }
  });

  test("after close nothing is reported; a path that cannot be a directory is not watched", async () => {
    const root = scratch();
    const seen: string[] = [];
    const watch = watchRecords(root, (session) => seen.push(session));
    appendFileSync(recordsPath(root, SESSION), line(record(1)));
    // The event in, its burst timer running (found in review: closing before the event arrived tested nothing).
    await new Promise((resolve) => setTimeout(resolve, SETTLE_MS / 2));
    watch.close(); // before the burst settles: its timer goes too
    await new Promise((resolve) => setTimeout(resolve, SETTLE_MS * 4));
    expect(seen).toEqual([]);

    writeFileSync(join(root, "file"), "");
    const refused = watchRecords(join(root, "file", "records"), () => undefined);
    expect(refused.watching).toBe(false);
    refused.close();
  });
});
