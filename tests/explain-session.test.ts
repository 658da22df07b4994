import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import fc from "fast-check";
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  changesBetween,
  classifyLines,
  lastRequests,
  readRecordsFile,
  recordedSessions,
  requestView,
  runExplain,
  terminalJson,
  terminalSafe,
  type FileView,
  type RequestView,
} from "../bin/explain.ts";
import { RECORDS_VERSION, recordsPath, type FileRecord, type RequestRecord } from "../plugin/records/format.ts";
import { start, tempProject } from "./helpers/harness.ts";

const REPO = join(import.meta.dir, "..");
const SESSION = "ses_2f0c8a1bd47e3f9a";

/** Runs `explain` in this process and returns what it printed. console is the command's only output. */
async function explain(...argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const { log, error } = console;
  console.log = (...parts: unknown[]) => void out.push(parts.join(" "));
  console.error = (...parts: unknown[]) => void err.push(parts.join(" "));
  try {
    const code = await runExplain(argv);
    return { code, stdout: out.join("\n"), stderr: err.join("\n") };
  } finally {
    Object.assign(console, { log, error });
  }
}

const sha256 = (text: string | Buffer) => createHash("sha256").update(text).digest("hex");

let scratch: string;
let worktree: string;
let recordsDir: string;
beforeEach(() => {
  scratch = realpathSync(mkdtempSync(join(tmpdir(), "explain-session-")));
  worktree = join(scratch, "repo");
  recordsDir = join(scratch, "records");
  mkdirSync(worktree);
  mkdirSync(recordsDir);
});
afterEach(() => rmSync(scratch, { recursive: true, force: true }));

/** Writes `text` to a worktree file and returns its hash, as the plugin records it. */
function put(path: string, text: string): string {
  mkdirSync(join(worktree, path, ".."), { recursive: true });
  writeFileSync(join(worktree, path), text);
  return sha256(text);
}

function file(path: string, sha: string, fields: Partial<FileRecord> = {}): FileRecord {
  return { path, sha256: sha, tokens: 100, total: 100, mode: "touched", level: "direct", state: "system", ...fields };
}

function request(n: number, files: FileRecord[], fields: Partial<RequestRecord> = {}): RequestRecord {
  const time = new Date(Date.UTC(2026, 10, 24, 10, 0, n)).toISOString();
  return { v: RECORDS_VERSION, time, session: SESSION, message: `msg_${n}`, agent: "build", delivery: "stable", worktree, pins: [], files, ...fields };
}

function writeRecords(records: readonly unknown[], { rotated = false, tail = "" } = {}): string {
  const path = recordsPath(recordsDir, SESSION, rotated);
  writeFileSync(path, records.map((record) => `${JSON.stringify(record)}\n`).join("") + tail);
  return path;
}

/** The lines printed for request `#n`, up to the next request or the closing section. */
function section(stdout: string, n: number): string {
  const found = stdout.split("\n\n").find((block) => block.startsWith(`#${n} `));
  if (found === undefined) throw new Error(`no request #${n} in:\n${stdout}`);
  return found;
}

const numbersShown = (stdout: string) => [...stdout.matchAll(/^#(\d+) /gm)].map((match) => Number(match[1]));

function lineOf(block: string, path: string): string {
  const found = block.split("\n").find((line) => line.startsWith(`  ${path} `));
  if (found === undefined) throw new Error(`no line for ${path} in:\n${block}`);
  return found;
}

/**
 * A realistic session in a monorepo. #1: the root file is OpenCode's. #2: an API file reached by a
 * tool call, an agent-ranked doc cut by the budget, a tool file named only. #3 (another message,
 * another agent): the root file edited, the API file unloaded, the web file pinned, the tool file gone.
 */
function realisticSession() {
  const rootOld = sha256("# Root\nUse pnpm.\n");
  const root = put("AGENTS.md", "# Root\nUse pnpm and turbo.\n");
  const api = put("packages/api/AGENTS.md", "# API\nValidate with zod.\n");
  const web = put("packages/web/AGENTS.md", "# Web\nUse signals.\n");
  const doc = put("docs/testing.md", "# Testing\nbun test.\n");
  const tools = put("tools/CLAUDE.md", "# Tools\n");
  const records = [
    request(1, [file("AGENTS.md", rootOld, { mode: "always", level: "root", state: "host", tokens: 0, total: 40 })]),
    request(2, [
      file("AGENTS.md", rootOld, { mode: "always", level: "root", state: "host", tokens: 0, total: 40 }),
      file("packages/api/AGENTS.md", api, { tokens: 120, total: 120, state: "conversation" }),
      file("docs/testing.md", doc, { mode: "agent", score: 0.87312, level: "other", state: "cut", tokens: 300, total: 500, left: 200, reason: "systemTokens budget" }),
      file("tools/CLAUDE.md", tools, { state: "omitted", tokens: 0, total: 900, reason: "deliveryTokens budget" }),
    ]),
    request(
      3,
      [
        file("AGENTS.md", root, { mode: "always", level: "root", state: "host", tokens: 0, total: 44 }),
        file("packages/api/AGENTS.md", api, { tokens: 0, total: 120, state: "unloaded", reason: "project_context unload" }),
        file("packages/web/AGENTS.md", web, { mode: "manual", tokens: 80, total: 80, reason: "pinned" }),
        file("docs/testing.md", doc, { mode: "agent", score: 0.87312, level: "other", state: "cut", tokens: 300, total: 500, left: 200 }),
      ],
      { message: "msg_3", agent: "plan", pins: ["packages/web"] },
    ),
  ];
  return { records, path: writeRecords(records) };
}

describe("explain --session: a session's requests from its records", () => {
  test("per request: its files with mode, state and tokens, what changed from the one before, and the files not on disk as last recorded", async () => {
    const { path } = realisticSession();
    writeFileSync(join(worktree, "packages/web/AGENTS.md"), "# Web\nUse signals. Edited after the session.\n");
    rmSync(join(worktree, "docs/testing.md"));

    const { code, stdout, stderr } = await explain("--session", SESSION, "--records", recordsDir);
    expect(stderr).toBe("");
    expect(code).toBe(0);
    expect(stdout).toContain(`Session:   ${SESSION}\nWorktree:  ${worktree}\nRequests:  3\nRecords:   ${path} (`);

    const first = section(stdout, 1);
    expect(first.split("\n")[0]).toBe("#1 2026-11-24T10:00:01.000Z  message msg_1  agent build  delivery stable");
    expect(lineOf(first, "AGENTS.md")).toMatch(/^ {2}AGENTS\.md +always +host +0 of 40 tokens$/);
    expect(first).toContain("changes: (the first recorded request)");

    const second = section(stdout, 2);
    expect(lineOf(second, "packages/api/AGENTS.md")).toMatch(/touched +conversation +120 tokens$/);
    expect(lineOf(second, "docs/testing.md")).toMatch(/agent 0\.873 +cut, 200 left +300 of 500 tokens {2}\(systemTokens budget\) {2}\[deleted since\]$/);
    expect(lineOf(second, "tools/CLAUDE.md")).toMatch(/touched +omitted +0 of 900 tokens {2}\(deliveryTokens budget\)$/);
    expect(second).toEndWith("\n  changes: added packages/api/AGENTS.md, docs/testing.md, tools/CLAUDE.md");
    // The root file of #1 and #2 is an older version: its change is #3's "new version", not a mark.
    expect(lineOf(second, "AGENTS.md")).not.toContain("[");

    const third = section(stdout, 3);
    expect(third.split("\n")[0]).toBe("#3 2026-11-24T10:00:03.000Z  message msg_3  agent plan  delivery stable");
    expect(third).toContain("\n  pins: packages/web\n");
    expect(lineOf(third, "packages/api/AGENTS.md")).toMatch(/unloaded +0 of 120 tokens {2}\(project_context unload\)$/);
    expect(lineOf(third, "packages/web/AGENTS.md")).toMatch(/manual +system +80 tokens {2}\(pinned\) {2}\[changed since\]$/);
    expect(lineOf(third, "AGENTS.md")).not.toContain("[");
    expect(third).toContain(
      "  changes: added packages/web/AGENTS.md; dropped tools/CLAUDE.md; packages/api/AGENTS.md conversation -> unloaded; new version of AGENTS.md; pinned packages/web",
    );
    expect(stdout).toEndWith("\n\nOn disk now, not as last recorded:\n  docs/testing.md  [deleted since]\n  packages/web/AGENTS.md  [changed since]");
  });

  test("every file as last recorded: no mark, and the closing line says so", async () => {
    realisticSession();
    const { stdout } = await explain("--session", SESSION, "--records", recordsDir);
    expect(stdout).not.toContain(" since]");
    expect(stdout).toEndWith("\n\nOn disk now: every file shown is as last recorded.");
  });

  test("--last N shows the last N, numbered as in the whole session, the first compared with the request before it; --all shows every one", async () => {
    realisticSession();
    const { stdout } = await explain("--session", SESSION, "--records", recordsDir, "--last", "1");
    expect(stdout).toContain("Requests:  3 (the last 1 shown: --last N or --all for more)");
    expect(numbersShown(stdout)).toEqual([3]);
    expect(section(stdout, 3)).toContain("new version of AGENTS.md");
    const all = await explain("--session", SESSION, "--records", recordsDir, "--all");
    expect(numbersShown(all.stdout)).toEqual([1, 2, 3]);
  });

  test("by default a long session shows its last 20 requests", async () => {
    const doc = put("AGENTS.md", "# Root\n");
    writeRecords(Array.from({ length: 45 }, (_, i) => request(i + 1, [file("AGENTS.md", doc)])));
    const { stdout } = await explain("--session", SESSION, "--records", recordsDir);
    expect(stdout).toContain("Requests:  45 (the last 20 shown");
    expect(numbersShown(stdout)).toEqual(Array.from({ length: 20 }, (_, i) => i + 26));
    expect(section(stdout, 26)).toContain("changes: none");
  });

  test("--json: the same as one line of JSON, the first shown request compared with the one before it", async () => {
    realisticSession();
    rmSync(join(worktree, "docs/testing.md"));
    const { code, stdout } = await explain("--session", SESSION, "--records", recordsDir, "--json", "--last", "2");
    expect(code).toBe(0);
    expect(stdout.split("\n")).toHaveLength(1);
    const report = JSON.parse(stdout) as { requests: number; shown: { number: number; agent: string; files: (FileView & { since: string | null })[]; changes: { added: string[] } }[] };
    expect(report.requests).toBe(3);
    expect(report.shown.map((shown) => shown.number)).toEqual([2, 3]);
    expect(report.shown[0]!.changes.added).toEqual(["packages/api/AGENTS.md", "docs/testing.md", "tools/CLAUDE.md"]);
    expect(report.shown[1]!.files.find((entry) => entry.path === "docs/testing.md")).toMatchObject({ mode: "agent", score: 0.87312, state: "cut", left: 200, since: "deleted since" });
  });

  test("the rotated file comes first, then the current one; both are named", async () => {
    const doc = put("AGENTS.md", "# Root\n");
    const rotated = writeRecords([request(1, [file("AGENTS.md", doc)]), request(2, [])], { rotated: true });
    const current = writeRecords([request(3, [file("AGENTS.md", doc, { state: "cut", left: 5 })])]);
    const { stdout } = await explain("--session", SESSION, "--records", recordsDir);
    expect(stdout).toMatch(new RegExp(`Records: {3}${rotated} \\(\\d+ B, 2 requests\\)\\n {11}${current} \\(\\d+ B, 1 request\\)`));
    expect(section(stdout, 2)).toContain("(no context files)");
    expect(section(stdout, 2)).toContain("changes: dropped AGENTS.md");
    expect(section(stdout, 3)).toContain("changes: added AGENTS.md");
  });

  test("the default records directory is $XDG_STATE_HOME/opencode-project-context", async () => {
    const saved = process.env.XDG_STATE_HOME;
    process.env.XDG_STATE_HOME = scratch;
    try {
      recordsDir = join(scratch, "opencode-project-context");
      mkdirSync(recordsDir);
      realisticSession();
      const { code, stdout } = await explain("--session", SESSION);
      expect(code).toBe(0);
      expect(stdout).toContain(`Records:   ${recordsPath(recordsDir, SESSION)}`);
    } finally {
      if (saved === undefined) delete process.env.XDG_STATE_HOME;
      else process.env.XDG_STATE_HOME = saved;
    }
  });
});

describe("explain --session: usage and sessions that are not there", () => {
  test.each([
    [["--session", "../../etc/passwd"], "not a session id"],
    [["--session", "ses x"], "not a session id"],
    [["--session", ""], "not a session id"],
    [["--session", "\u001b]0;pwned\u0007"], "not a session id: \"\\\\u001b]0;pwned\\\\u0007\""],
    [["--session", SESSION, "--last", "0"], "--last takes a positive whole number"],
    [["--session", SESSION, "--last", "-3"], "--last"],
    [["--session", SESSION, "--last", "1e3"], "--last takes a positive whole number"],
    [["--session", SESSION, "--last", "2", "--all"], "choose one"],
    [["--session", SESSION, "some/dir"], "--session reads records; it takes no \"some/dir\""],
    [["--session", SESSION, "--touch", "a.ts"], "it takes no \"touch\""],
    [["--json"], "--json goes with --session"],
    [["--records", "/tmp"], "--records goes with --session"],
    [["--session"], "argument missing"],
    [["--bogus"], "Unknown option"],
  ])("%j is a usage error (exit 2)", async (argv, message) => {
    const { code, stderr, stdout } = await explain(...argv);
    expect(code).toBe(2);
    expect(stdout).toBe("");
    expect(stderr).toContain(message);
    expect(stderr).toContain("usage: explain");
    expect(stderr).not.toContain("\u001b");
  });

  test("an unknown session: exit 1, and the sessions that have records there, most recent first (steering files and strays left out)", async () => {
    const names = ["ses_old.jsonl", "ses_new.jsonl", "ses_mid.1.jsonl", "ses_new.steer.jsonl", "notes.txt", "bad name.jsonl", "x.y.jsonl"];
    names.forEach((name, i) => {
      writeFileSync(join(recordsDir, name), "");
      const seconds = 1_800_000_000 + ({ "ses_old.jsonl": 1, "ses_mid.1.jsonl": 2, "ses_new.jsonl": 3 } as Record<string, number>)[name]! * 60 || 1_800_000_000 + i;
      utimesSync(join(recordsDir, name), seconds, seconds);
    });
    const { code, stdout, stderr } = await explain("--session", "ses_missing", "--records", recordsDir);
    expect(code).toBe(1);
    expect(stdout).toBe("");
    expect(stderr).toContain(`no records of session ses_missing in ${recordsDir}`);
    const listed = stderr.split("\n").filter((line) => line.startsWith("  ")).map((line) => line.trim().split(" ")[0]);
    expect(listed).toEqual(["ses_new", "ses_mid", "ses_old"]);
    expect(recordedSessions(recordsDir).map((session) => session.id)).toEqual(["ses_new", "ses_mid", "ses_old"]);
  });

  test("no records directory at all: exit 1, and where records would be", async () => {
    const { code, stderr } = await explain("--session", SESSION, "--records", join(scratch, "nowhere"));
    expect(code).toBe(1);
    expect(stderr).toContain("No session has records there yet.");
    expect(stderr).toContain("recordsDir");
  });

  test("more sessions than fit are counted, not listed", async () => {
    for (let i = 0; i < 30; i++) writeFileSync(join(recordsDir, `ses_${i}.jsonl`), "");
    const { stderr } = await explain("--session", SESSION, "--records", recordsDir);
    expect(stderr.split("\n").filter((line) => line.includes("last written"))).toHaveLength(20);
    expect(stderr).toContain("(10 more)");
  });

  test("a FIFO in place of the records file does not hang the command: it is no records file", async () => {
    const fifo = spawnSync("mkfifo", [recordsPath(recordsDir, SESSION)]);
    expect(fifo.status).toBe(0);
    const { code, stderr } = await explain("--session", SESSION, "--records", recordsDir);
    expect(code).toBe(1);
    expect(stderr).toContain("no records of session");
  });
});

describe("explain --session: damaged, foreign and huge records", () => {
  test("a torn last line (being written) is skipped with a note; the requests before it are shown", async () => {
    const doc = put("AGENTS.md", "# Root\n");
    const whole = JSON.stringify(request(2, [file("AGENTS.md", doc)]));
    writeRecords([request(1, [file("AGENTS.md", doc)])], { tail: whole.slice(0, whole.length / 2) });
    const { code, stdout } = await explain("--session", SESSION, "--records", recordsDir);
    expect(code).toBe(0);
    expect(stdout).toContain("Requests:  1\n");
    expect(stdout).toContain("1 unreadable line skipped");
  });

  test("records of another format version are skipped with a note; a session with nothing readable exits 1", async () => {
    const doc = put("AGENTS.md", "# Root\n");
    writeRecords([request(1, [file("AGENTS.md", doc)])], { rotated: true });
    writeRecords([{ ...request(2, []), v: 2 }, { ...request(3, []), v: 2 }, { ...request(4, []), v: "1" }]);
    const mixed = await explain("--session", SESSION, "--records", recordsDir);
    expect(mixed.code).toBe(0);
    expect(mixed.stdout).toContain("Requests:  1\n");
    expect(mixed.stdout).toContain("2 records of format version 2 skipped (this explain reads version 1");
    expect(mixed.stdout).toContain('1 record of format version "1" skipped');

    rmSync(recordsPath(recordsDir, SESSION, true));
    const foreign = await explain("--session", SESSION, "--records", recordsDir);
    expect(foreign.code).toBe(1);
    expect(foreign.stdout).toContain("Requests:  0");
    expect(foreign.stderr).toContain("no request of session");
  });

  test("malformed entries (a file that is null, a number, without a path; pins and counts of the wrong type) are left out or shown as unknown, never thrown on", async () => {
    const doc = put("AGENTS.md", "# Root\n");
    const broken = {
      ...request(1, []),
      time: 42,
      agent: { name: "x" },
      pins: "packages/api",
      files: [null, 7, "AGENTS.md", { sha256: doc }, { path: ["a"] }, { path: "AGENTS.md", sha256: doc, tokens: "12", total: Infinity, mode: 3, state: null, score: "high" }],
    };
    writeRecords([broken]);
    const { code, stdout } = await explain("--session", SESSION, "--records", recordsDir);
    expect(code).toBe(0);
    const block = section(stdout, 1);
    expect(block.split("\n")[0]).toBe("#1 ?  message msg_1  agent (none)  delivery stable");
    expect(block).not.toContain("pins:");
    expect(block.split("\n").filter((line) => line.startsWith("  ") && !line.startsWith("  changes"))).toEqual([expect.stringMatching(/^ {2}AGENTS\.md {2}\? +\? +0 tokens$/)]);
  });

  test("paths and fields with newlines, ANSI and C1 escapes, bidi overrides and invisible characters are printed escaped: the terminal is never driven by a record", async () => {
    const hostile = ["evil\u001b[2J\u001b]0;owned\u0007.md", "line\nbreak/AGENTS.md", "c1\u009b31m/AGENTS.md", "bidi\u202egnp.md", "zero\u200bwidth.md", "back\\slash.md", "lone\ud800.md", "cr\roverwrite.md", "sep\u2028x.md"];
    writeRecords([
      // A mode no plugin writes: every recorded string is printed escaped, not only the paths.
      request(1, hostile.map((path) => ({ ...file(path, "0".repeat(64), { reason: `why\u001b[31m${path}` }), mode: "touched\u001b[0m" }) as unknown as FileRecord), {
        message: "msg\u001b[1A",
        agent: "build\u009d",
        pins: ["pin\u0085x"],
      }),
      request(2, [file("\u001b[H", "1".repeat(64))]),
    ]);
    const text = await explain("--session", SESSION, "--records", recordsDir);
    const json = await explain("--session", SESSION, "--records", recordsDir, "--json");
    for (const output of [text.stdout, json.stdout]) {
      expect(output).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u200b\u202e\u2028\u2029]/);
      expect(output).not.toMatch(/\p{Cs}/u);
    }
    expect(text.stdout).toContain("  evil\\x1b[2J\\x1b]0;owned\\x07.md ");
    expect(text.stdout).toContain("  line\\nbreak/AGENTS.md ");
    expect(text.stdout).toContain("bidi\\u{202e}gnp.md");
    expect(text.stdout).toContain("back\\\\slash.md");
    expect(text.stdout).toContain("lone\\u{d800}.md");
    expect(text.stdout).toContain("message msg\\x1b[1A  agent build\\x9d");
    expect(text.stdout).toContain("changes: added \\x1b[H; dropped evil\\x1b[2J");
    // The JSON reads back to the very values recorded.
    const report = JSON.parse(json.stdout) as { shown: { files: { path: string }[] }[] };
    expect(report.shown[0]!.files.map((entry) => entry.path)).toEqual(hostile);
  });

  test("a recorded path never leads out of the worktree: `..`, an absolute path, a symlink out, a NUL", async () => {
    const outside = join(scratch, "outside");
    mkdirSync(outside);
    const secret = "# not the project's\n";
    writeFileSync(join(outside, "AGENTS.md"), secret);
    symlinkSync(outside, join(worktree, "linked"));
    put("AGENTS.md", secret);
    writeRecords([
      request(1, [
        file("../outside/AGENTS.md", sha256(secret)),
        file("linked/AGENTS.md", sha256(secret)),
        file(join(outside, "AGENTS.md"), sha256(secret)),
        file("AGENTS.md\u0000.txt", sha256(secret)),
        file("/AGENTS.md", sha256(secret)),
      ]),
    ]);
    const { code, stdout } = await explain("--session", SESSION, "--records", recordsDir);
    expect(code).toBe(0);
    const block = section(stdout, 1);
    expect(lineOf(block, "../outside/AGENTS.md")).toContain("[unreadable since: resolves outside the worktree");
    expect(lineOf(block, "linked/AGENTS.md")).toContain("[unreadable since: resolves outside the worktree");
    // An absolute path is taken below the worktree, as every recorded path is: not there.
    expect(lineOf(block, join(outside, "AGENTS.md"))).toContain("[deleted since]");
    expect(lineOf(block, "AGENTS.md\\x00.txt")).toContain("[unreadable since:");
    // "/AGENTS.md" joined to the worktree is its root file, whose bytes are as recorded.
    expect(lineOf(block, "/AGENTS.md")).not.toContain("[");
  });

  test("a worktree that no longer exists: a note, and no file is marked", async () => {
    writeRecords([request(1, [file("AGENTS.md", "0".repeat(64))], { worktree: join(scratch, "gone") })]);
    const { code, stdout } = await explain("--session", SESSION, "--records", recordsDir);
    expect(code).toBe(0);
    expect(stdout).toContain(`Note: ${join(scratch, "gone")} no longer exists here: its files are not compared with the disk`);
    expect(stdout).not.toContain("since]");
    expect(stdout).not.toContain("On disk now");
  });

  test("50 MB of records (a rotated file and the current one, 25 MB each) is read whole, shown in bounded time", async () => {
    const files = Array.from({ length: 12 }, (_, i) => file(`packages/p${i}/AGENTS.md`, sha256(String(i)), { mode: "agent", score: i / 12, state: "cut", left: 40 }));
    const line = (n: number) => `${JSON.stringify(request(n, files, { message: `msg_${n}`.padEnd(40, "x") }))}\n`;
    const perFile = Math.ceil((25 * 1024 * 1024) / line(1).length);
    writeFileSync(recordsPath(recordsDir, SESSION, true), Array.from({ length: perFile }, (_, i) => line(i + 1)).join(""));
    writeFileSync(recordsPath(recordsDir, SESSION), Array.from({ length: perFile }, (_, i) => line(perFile + i + 1)).join(""));
    const started = performance.now();
    const { code, stdout } = await explain("--session", SESSION, "--records", recordsDir, "--last", "3");
    expect(performance.now() - started).toBeLessThan(15_000);
    expect(code).toBe(0);
    expect(stdout).toContain(`Requests:  ${2 * perFile} (the last 3 shown`);
    expect(stdout).toMatch(/\(25\.\d MB, \d+ requests\)/);
    expect(section(stdout, 2 * perFile)).toContain("changes: none");
  }, 30_000);

  test("a file over the read limit is read from its end, from a whole line on, with a note", () => {
    const doc = sha256("x");
    const path = writeRecords(Array.from({ length: 50 }, (_, i) => request(i + 1, [file("AGENTS.md", doc)])));
    const read = readRecordsFile(path, 1000)!;
    expect(read.records.length).toBeGreaterThan(0);
    expect(read.records.at(-1)!.message).toBe("msg_50");
    expect(read.unreadable).toBe(0);
    expect(read.unreadBytes).toBeGreaterThan(read.bytes - 1000);
    // A limit that ends exactly at a line's start keeps that whole line.
    const lastLine = `${JSON.stringify(request(50, [file("AGENTS.md", doc)]))}\n`;
    expect(readRecordsFile(path, Buffer.byteLength(lastLine))!.records.map((record) => record.message)).toEqual(["msg_50"]);
    expect(readRecordsFile(path, Buffer.byteLength(lastLine) - 1)!.records).toEqual([]);
  });
});

// ---- properties ----

/** What a terminal acts on or hides (the backslash is safe to print: terminalSafe doubles it to stay reversible). */
const unsafeChar = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}\p{Default_Ignorable_Code_Point}]/u;

/** The inverse of terminalSafe: the escaped text names exactly one original. */
function unescape(text: string): string {
  return text.replace(/\\(\\|n|r|t|x[0-9a-f]{2}|u\{[0-9a-f]+\})/g, (_, escape: string) => {
    if (escape === "\\") return "\\";
    if (escape.length === 1) return ({ n: "\n", r: "\r", t: "\t" } as Record<string, string>)[escape]!;
    return String.fromCodePoint(parseInt(escape.startsWith("x") ? escape.slice(1) : escape.slice(2, -1), 16));
  });
}

const hostileString = fc.oneof(
  fc.string({ unit: "binary", maxLength: 60 }),
  fc.string({ unit: fc.constantFrom("\u001b", "[", "\\", "x", "1", "b", "\u009b", "\u202e", "\u200b", "\ud800", "\udc00", "\n", "\r", "é", "😀", "\u{e0041}", "\u2028"), maxLength: 60 }),
);

describe("properties", () => {
  test("terminalSafe leaves no character a terminal acts on or hides, and is reversible (two texts never print alike)", () => {
    fc.assert(
      fc.property(hostileString, (text) => {
        const safe = terminalSafe(text);
        expect(safe).not.toMatch(unsafeChar);
        expect(unescape(safe)).toBe(text);
      }),
      { numRuns: 2000 },
    );
  });

  test("terminalJson is one line of JSON that reads back to the value, with nothing a terminal acts on", () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 3 }), hostileString, (value, text) => {
        const input = { value, text };
        const json = terminalJson(input);
        expect(json).not.toMatch(/[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]/u);
        expect(JSON.parse(json)).toEqual(JSON.parse(JSON.stringify(input)));
      }),
      { numRuns: 1000 },
    );
  });

  const viewFile = fc.record({
    path: fc.constantFrom("AGENTS.md", "a/AGENTS.md", "b/AGENTS.md", "c/d/CLAUDE.md", "../x", "e\n.md", ""),
    sha256: fc.constantFrom("a", "b"),
    tokens: fc.nat(10),
    total: fc.nat(10),
    mode: fc.constantFrom("touched", "always", "manual", "agent"),
    state: fc.constantFrom("system", "cut", "conversation", "host", "omitted", "unloaded"),
  });
  const view = fc.record({
    files: fc.uniqueArray(viewFile, { selector: (entry) => entry.path, maxLength: 7 }),
    pins: fc.uniqueArray(fc.constantFrom("a", "b", "c/d"), { maxLength: 3 }),
  }).map(({ files, pins }): RequestView => ({ time: "t", message: null, agent: null, delivery: "stable", worktree: "/w", pins, files }));

  test("changesBetween: applying the changes to the request before gives the request after; identical requests have none", () => {
    fc.assert(
      fc.property(view, view, (before, after) => {
        const changes = changesBetween(before, after);
        const paths = new Set(before.files.map((entry) => entry.path));
        for (const path of changes.dropped) expect(paths.delete(path)).toBe(true);
        for (const path of changes.added) {
          expect(paths.has(path)).toBe(false);
          paths.add(path);
        }
        expect([...paths].sort()).toEqual(after.files.map((entry) => entry.path).sort());
        const states = new Map(before.files.map((entry) => [entry.path, entry.state]));
        for (const { path, from, to } of changes.states) {
          expect(states.get(path)).toBe(from);
          states.set(path, to);
        }
        for (const entry of after.files) if (!changes.added.includes(entry.path)) expect(states.get(entry.path)).toBe(entry.state);
        const before_ = new Map(before.files.map((entry) => [entry.path, entry.sha256]));
        expect(changes.versions).toEqual(after.files.filter((entry) => before_.has(entry.path) && before_.get(entry.path) !== entry.sha256).map((entry) => entry.path));
        expect(new Set([...before.pins.filter((pin) => !changes.unpinned.includes(pin)), ...changes.pinned])).toEqual(new Set(after.pins));
        expect(changesBetween(after, after)).toEqual({ added: [], dropped: [], states: [], modes: [], versions: [], pinned: [], unpinned: [] });
      }),
      { numRuns: 2000 },
    );
  });

  test("lastRequests: the last N (all when fewer), numbered consecutively up to the session's count", () => {
    fc.assert(
      fc.property(fc.array(fc.nat(), { maxLength: 60 }), fc.oneof(fc.integer({ min: 1, max: 80 }), fc.constant("all" as const)), (requests, last) => {
        const shown = lastRequests(requests, last);
        expect(shown.length).toBe(last === "all" ? requests.length : Math.min(last, requests.length));
        shown.forEach(({ number, request }, i) => {
          expect(number).toBe(requests.length - shown.length + i + 1);
          expect(request).toBe(requests[number - 1]!);
        });
      }),
    );
  });

  test("classifyLines: every record of this version, in order; every other line counted once, by why it was skipped", () => {
    const line = fc.oneof(
      fc.nat(1000).map((n) => ({ kind: "record" as const, text: JSON.stringify(request(n, [])), n })),
      fc.integer({ min: 2, max: 9 }).map((v) => ({ kind: "version" as const, text: JSON.stringify({ ...request(0, []), v }), v })),
      fc.string({ unit: "binary", maxLength: 30 }).filter((text) => !text.includes("\n") && text !== "").map((text) => ({ kind: "junk" as const, text })),
    );
    fc.assert(
      fc.property(fc.array(line, { maxLength: 30 }), fc.nat(200), (lines, tear) => {
        const whole = lines.map((entry) => entry.text).join("\n");
        const torn = JSON.stringify(request(9999, [])).slice(0, tear % 150);
        const { records, unreadable, otherVersions } = classifyLines(`${whole}\n${torn}`);
        const expected = lines.filter((entry) => entry.kind === "record");
        expect(records.map((record) => record.message)).toEqual(expected.map((entry) => `msg_${entry.n}`));
        const versions = [...otherVersions.values()].reduce((sum, n) => sum + n, 0);
        expect(versions).toBe(lines.filter((entry) => entry.kind === "version").length);
        expect(records.length + versions + unreadable).toBe(lines.filter((entry) => entry.text !== "").length + (torn === "" ? 0 : 1));
      }),
      { numRuns: 500 },
    );
  });

  test("readRecordsFile with any limit: a suffix of the records, never a torn one, and the bytes left out accounted for", () => {
    const path = join(tmpdir(), `explain-session-${process.pid}-${Date.now()}.jsonl`);
    const records = Array.from({ length: 40 }, (_, i) => request(i + 1, [file(`é/ü/${"😀".repeat(i % 5)}/AGENTS.md`, sha256(String(i)))]));
    writeFileSync(path, records.map((record) => `${JSON.stringify(record)}\n`).join(""));
    try {
      fc.assert(
        fc.property(fc.integer({ min: 1, max: 40_000 }), (limit) => {
          const read = readRecordsFile(path, limit)!;
          expect(read.unreadable).toBe(0);
          expect(read.records).toEqual(records.slice(records.length - read.records.length));
          expect(read.unreadBytes === 0).toBe(read.bytes <= limit);
          expect(read.bytes - read.unreadBytes).toBeLessThanOrEqual(limit);
        }),
        { numRuns: 300 },
      );
    } finally {
      rmSync(path, { force: true });
    }
  });

  test("readRecordsFile at the edges of its limit: a file of exactly the limit is read whole, one byte over is not (a flaky CI run found it)", () => {
    const path = join(tmpdir(), `explain-session-edge-${process.pid}-${Date.now()}.jsonl`);
    const records = Array.from({ length: 5 }, (_, i) => request(i + 1, [file(`a${i}/AGENTS.md`, sha256(String(i)))]));
    const text = records.map((record) => `${JSON.stringify(record)}\n`).join("");
    writeFileSync(path, text);
    const size = Buffer.byteLength(text);
    try {
      for (const limit of [size - 1, size, size + 1]) {
        const read = readRecordsFile(path, limit)!;
        expect(read.unreadBytes === 0).toBe(size <= limit);
        expect(read.bytes - read.unreadBytes).toBeLessThanOrEqual(limit);
        // One byte over: the first record is the one cut, the others are whole.
        expect(read.records).toEqual(size <= limit ? records : records.slice(1));
        expect(read.unreadable).toBe(0);
      }
    } finally {
      rmSync(path, { force: true });
    }
  });

  test("requestView never throws on any JSON in a record's place, and keeps only files with a string path", () => {
    fc.assert(
      fc.property(fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 8 }), fc.jsonValue({ maxDepth: 1 }), (files, pins) => {
        const shown = requestView({ ...request(1, []), files, pins } as unknown as RequestRecord);
        expect(shown.files.length).toBe(files.filter((entry) => typeof entry === "object" && entry !== null && typeof (entry as { path?: unknown }).path === "string").length);
        expect(shown.pins.every((pin) => typeof pin === "string")).toBe(true);
      }),
    );
  });
});

describe("records the real plugin wrote", () => {
  test("a session driven through the plugin's hooks (records in recordsDir) reads back: its files, modes, states, changes, and an edit made since", async () => {
    const project = await tempProject("monorepo");
    try {
      const plugin = await start(project.root, { recordsDir });
      const message = (id: string) => plugin.hooks["chat.message"]!({ sessionID: SESSION, agent: "build" } as never, { message: { id, sessionID: SESSION, role: "user" }, parts: [] } as never);
      // OpenCode's own prompt carries the root file, as it does for a session at the root.
      const header = `You are opencode.\nInstructions from: ${join(project.root, "AGENTS.md")}\n${readFileSync(join(project.root, "AGENTS.md"), "utf8")}`;
      await message("msg_first");
      await plugin.step(SESSION, header);
      const args = { filePath: "services/api/plugins/payments/src/charge.ts" };
      await plugin.touch(SESSION, "edit", args);
      await plugin.hooks["tool.execute.after"]!({ tool: "edit", sessionID: SESSION, callID: "call-edit", args } as never, { title: "edit", output: "done", metadata: {} } as never);
      await message("msg_second");
      await plugin.step(SESSION, header);
      // dispose writes every queued record.
      await plugin.dispose();
      writeFileSync(join(project.root, "services/api/AGENTS.md"), "# API\nEdited after the session.\n");

      const { code, stdout, stderr } = await explain("--session", SESSION, "--records", recordsDir);
      expect(stderr).toBe("");
      expect(code).toBe(0);
      expect(stdout).toContain(`Worktree:  ${project.root}\nRequests:  2\n`);
      const first = section(stdout, 1);
      expect(first.split("\n")[0]).toMatch(/^#1 \d{4}-\d\d-\d\dT[\d:.]+Z {2}message msg_first {2}agent build {2}delivery stable$/);
      expect(lineOf(first, "AGENTS.md")).toMatch(/touched +host +0 of \d+ tokens {2}\(OpenCode's own prompt carries it\)$/);
      const second = section(stdout, 2);
      expect(second.split("\n")[0]).toContain("message msg_second  agent build");
      expect(lineOf(second, "services/api/plugins/payments/AGENTS.md")).toMatch(/touched +conversation +\d+ tokens$/);
      expect(lineOf(second, "services/api/AGENTS.md")).toMatch(/touched +conversation +\d+ tokens {2}\[changed since\]$/);
      expect(second).toContain("changes: added services/api/plugins/payments/AGENTS.md, services/api/AGENTS.md");
      expect(stdout).toEndWith("On disk now, not as last recorded:\n  services/api/AGENTS.md  [changed since]");
    } finally {
      await project.cleanup();
    }
  });
});

describe("the built command on plain Node", () => {
  test("`opencode-project-context explain --session` runs from the tsc build with node, no Bun", () => {
    realisticSession();
    const out = join(scratch, "build");
    // --noCheck: types are checked elsewhere; this emits what Node runs, one module per file as
    // scripts/build.ts does, in a temp dir (dist/ is the build's own). A failed emit fails the run below.
    spawnSync(process.execPath, [join(REPO, "node_modules/typescript/bin/tsc"), "-p", join(REPO, "tsconfig.build.json"), "--outDir", join(out, "dist"), "--declaration", "false", "--noCheck"], { encoding: "utf8" });
    symlinkSync(join(REPO, "node_modules"), join(out, "node_modules"));
    const node = Bun.which("node");
    expect(node).not.toBeNull();
    const run = spawnSync(node!, [join(out, "dist/bin/cli.js"), "explain", "--session", SESSION, "--records", recordsDir, "--last", "1"], { encoding: "utf8", env: { PATH: "/usr/bin:/bin", HOME: scratch } });
    expect(run.stderr).toBe("");
    expect(run.status).toBe(0);
    expect(run.stdout).toContain("#3 2026-11-24T10:00:03.000Z  message msg_3  agent plan");
    const missing = spawnSync(node!, [join(out, "dist/bin/cli.js"), "explain", "--session", "ses_none", "--records", recordsDir], { encoding: "utf8" });
    expect(missing.status).toBe(1);
    expect(missing.stderr).toContain(SESSION);
  }, 60_000);
});
