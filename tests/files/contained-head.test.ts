import { afterEach, describe, expect, test } from "bun:test";
import fs, { mkdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { decodeText, readContainedHead, type HeadOutcome } from "../../plugin/files/contained.ts";
import { Scratch } from "./helpers.ts";

const scratch = new Scratch();
afterEach(() => scratch.cleanup());
const HEAD = 4096;

function headOf(outcome: HeadOutcome): { text: string; truncated: boolean } {
  if (outcome.kind !== "head") throw new Error(`expected a head, got ${JSON.stringify(outcome)}`);
  return { text: Buffer.from(outcome.bytes).toString("latin1"), truncated: outcome.truncated };
}

function reasonOf(outcome: HeadOutcome): string {
  return outcome.kind === "skip" ? outcome.skip.reason : outcome.kind;
}

/** Runs `during` right after the next resolve of a path, before the open: a race made deterministic. */
function afterNextResolve<T>(during: () => void, run: () => T): T {
  const original = fs.realpathSync.native;
  fs.realpathSync.native = ((path: string) => {
    const resolved = original(path);
    fs.realpathSync.native = original;
    during();
    return resolved;
  }) as typeof original;
  try {
    return run();
  } finally {
    fs.realpathSync.native = original;
  }
}

describe("readContainedHead", () => {
  test("the first bytes, and whether the file goes on past them; the whole of a shorter file", () => {
    const root = scratch.dir();
    scratch.write(root, { "short.md": "---\nx\n", "exact.md": "a".repeat(HEAD), "long.md": `${"b".repeat(HEAD)}tail`, "empty.md": "" });
    expect(headOf(readContainedHead(join(root, "short.md"), root, HEAD))).toEqual({ text: "---\nx\n", truncated: false });
    expect(headOf(readContainedHead(join(root, "exact.md"), root, HEAD))).toEqual({ text: "a".repeat(HEAD), truncated: false });
    expect(headOf(readContainedHead(join(root, "long.md"), root, HEAD))).toEqual({ text: "b".repeat(HEAD), truncated: true });
    expect(headOf(readContainedHead(join(root, "empty.md"), root, HEAD))).toEqual({ text: "", truncated: false });
  });

  test("a symlink to a file inside the worktree gives its target's head", () => {
    const root = scratch.dir();
    scratch.write(root, { "shared/rules.md": "---\ninclude: always\n---\n" });
    mkdirSync(join(root, "a"));
    symlinkSync("../shared/rules.md", join(root, "a/AGENTS.md"));
    expect(headOf(readContainedHead(join(root, "a/AGENTS.md"), root, HEAD)).text).toBe("---\ninclude: always\n---\n");
  });

  test("a symlinked file leading out, or a symlinked directory on the way out, is refused", () => {
    const root = scratch.dir();
    const outside = scratch.dir();
    scratch.write(outside, { "AGENTS.md": "---\ninclude: always\n---\nOUTSIDE\n", "deep/AGENTS.md": "OUTSIDE\n" });
    mkdirSync(join(root, "a"));
    symlinkSync(join(outside, "AGENTS.md"), join(root, "a/AGENTS.md"));
    symlinkSync(outside, join(root, "link"));
    expect(reasonOf(readContainedHead(join(root, "a/AGENTS.md"), root, HEAD))).toContain("outside the worktree");
    expect(reasonOf(readContainedHead(join(root, "link/deep/AGENTS.md"), root, HEAD))).toContain("outside the worktree");
    expect(reasonOf(readContainedHead(join(root, "link/AGENTS.md"), root, HEAD))).toContain("outside the worktree");
  });

  test("a FIFO is refused at once (never a hang), a directory named AGENTS.md too; missing is absent", () => {
    const root = scratch.dir();
    mkdirSync(join(root, "dir/AGENTS.md"), { recursive: true });
    expect(spawnSync("mkfifo", [join(root, "AGENTS.md")]).status).toBe(0);
    expect(reasonOf(readContainedHead(join(root, "AGENTS.md"), root, HEAD))).toBe("not a regular file");
    expect(reasonOf(readContainedHead(join(root, "dir/AGENTS.md"), root, HEAD))).toBe("not a regular file");
    expect(reasonOf(readContainedHead(join(root, "none/AGENTS.md"), root, HEAD))).toBe("absent");
  });

  test("a file swapped for a symlink after it was resolved: the open refuses the link (a race: tried again)", () => {
    const root = scratch.dir();
    const outside = scratch.dir();
    scratch.write(root, { "AGENTS.md": "inside\n" });
    scratch.write(outside, { "AGENTS.md": "OUTSIDE\n" });
    const outcome = afterNextResolve(
      () => {
        rmSync(join(root, "AGENTS.md"));
        symlinkSync(join(outside, "AGENTS.md"), join(root, "AGENTS.md"));
      },
      () => readContainedHead(join(root, "AGENTS.md"), root, HEAD),
    );
    expect(outcome).toMatchObject({ kind: "skip", skip: { reason: "was replaced by a symlink while being opened", transient: true } });
  });

  test("a directory on the way swapped for a symlink out after the path was resolved: the opened file's real path is outside, refused", () => {
    const root = scratch.dir();
    const outside = scratch.dir();
    scratch.write(root, { "a/AGENTS.md": "inside\n" });
    scratch.write(outside, { "a/AGENTS.md": "OUTSIDE\n" });
    const outcome = afterNextResolve(
      () => {
        renameSync(join(root, "a"), join(root, "moved"));
        symlinkSync(join(outside, "a"), join(root, "a"));
      },
      () => readContainedHead(join(root, "a/AGENTS.md"), root, HEAD),
    );
    expect(reasonOf(outcome)).toBe(`resolves outside the worktree (${join(outside, "a/AGENTS.md")})`);
  });

  test("bytes come back undecoded: NUL bytes and invalid UTF-8 are for decodeText to refuse", () => {
    const root = scratch.dir();
    writeFileSync(join(root, "bad.md"), new Uint8Array([0x2d, 0x2d, 0x2d, 0x0a, 0xff, 0x0a]));
    writeFileSync(join(root, "bin.md"), new Uint8Array([0x2d, 0x2d, 0x2d, 0x00]));
    const bad = readContainedHead(join(root, "bad.md"), root, HEAD);
    const bin = readContainedHead(join(root, "bin.md"), root, HEAD);
    if (bad.kind !== "head" || bin.kind !== "head") throw new Error("expected heads");
    expect([...bad.bytes]).toEqual([0x2d, 0x2d, 0x2d, 0x0a, 0xff, 0x0a]);
    expect(decodeText(bad.bytes, bad.truncated)).toEqual({ kind: "refused", reason: "not valid UTF-8" });
    expect(decodeText(bin.bytes, bin.truncated)).toEqual({ kind: "refused", reason: "binary (contains NUL bytes)" });
  });

  test("a head cut inside a multi-byte character decodes without it; a whole file ending inside one is refused", () => {
    const root = scratch.dir();
    // 4095 ASCII bytes, then a 3-byte character straddling the head's end.
    scratch.write(root, { "AGENTS.md": `---\n${"a".repeat(HEAD - 5)}€tail` });
    const head = readContainedHead(join(root, "AGENTS.md"), root, HEAD);
    if (head.kind !== "head") throw new Error("expected a head");
    expect(head).toMatchObject({ truncated: true });
    expect(head.bytes.length).toBe(HEAD);
    expect(decodeText(head.bytes, head.truncated)).toEqual({ kind: "text", text: `---\n${"a".repeat(HEAD - 5)}` });
    expect(decodeText(head.bytes, false)).toEqual({ kind: "refused", reason: "not valid UTF-8" });
  });
});
