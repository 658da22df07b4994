import { afterEach, describe, expect, test } from "bun:test";
import fs, { mkdirSync, renameSync, rmSync, symlinkSync } from "node:fs";
import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { readContained, readContainedHead, type HeadOutcome, type ReadOutcome } from "../../plugin/files/contained.ts";
import { Scratch } from "./helpers.ts";

const scratch = new Scratch();
afterEach(() => scratch.cleanup());

/** Both contained readers decide containment the same way (withContained): every case runs for each. */
const READERS: Record<string, (path: string, root: string) => ReadOutcome | HeadOutcome> = {
  readContained: (path, root) => readContained(path, dirname(path), root, 1024),
  readContainedHead: (path, root) => readContainedHead(path, root, 4096),
};

function reasonOf(outcome: ReadOutcome | HeadOutcome): string {
  return outcome.kind === "skip" ? outcome.skip.reason : outcome.kind;
}

/** The text a reader gave: a whole file's raw text, or a head's bytes. */
function textOf(outcome: ReadOutcome | HeadOutcome): string {
  if (outcome.kind === "file") return outcome.version.raw;
  if (outcome.kind === "head") return Buffer.from(outcome.bytes).toString("utf8");
  throw new Error(`expected a read, got ${JSON.stringify(outcome)}`);
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

for (const [name, read] of Object.entries(READERS)) {
  describe(`containment at read time: ${name}`, () => {
    test("a symlink to a file inside the worktree gives its target", () => {
      const root = scratch.dir();
      scratch.write(root, { "shared/rules.md": "---\ninclude: always\n---\n" });
      mkdirSync(join(root, "a"));
      symlinkSync("../shared/rules.md", join(root, "a/AGENTS.md"));
      expect(textOf(read(join(root, "a/AGENTS.md"), root))).toBe("---\ninclude: always\n---\n");
    });

    test("a symlinked file leading out, or a symlinked directory on the way out, is refused", () => {
      const root = scratch.dir();
      const outside = scratch.dir();
      scratch.write(outside, { "AGENTS.md": "---\ninclude: always\n---\nOUTSIDE\n", "deep/AGENTS.md": "OUTSIDE\n" });
      mkdirSync(join(root, "a"));
      symlinkSync(join(outside, "AGENTS.md"), join(root, "a/AGENTS.md"));
      symlinkSync(outside, join(root, "link"));
      for (const path of ["a/AGENTS.md", "link/deep/AGENTS.md", "link/AGENTS.md"]) {
        const outcome = read(join(root, path), root);
        expect(outcome.kind).toBe("skip");
        expect(reasonOf(outcome)).toContain("outside the worktree");
      }
    });

    test("a FIFO is refused at once (never a hang), a directory named AGENTS.md too; missing is absent", () => {
      const root = scratch.dir();
      mkdirSync(join(root, "dir/AGENTS.md"), { recursive: true });
      expect(spawnSync("mkfifo", [join(root, "AGENTS.md")]).status).toBe(0);
      expect(reasonOf(read(join(root, "AGENTS.md"), root))).toBe("not a regular file");
      expect(reasonOf(read(join(root, "dir/AGENTS.md"), root))).toBe("not a regular file");
      expect(reasonOf(read(join(root, "none/AGENTS.md"), root))).toBe("absent");
    });

    /** `rel` inside and (another text) outside; `swap` runs right after the read resolved the path. */
    const swappedWhileOpening = (rel: string, swap: (root: string, outside: string) => void) => {
      const root = scratch.dir();
      const outside = scratch.dir();
      scratch.write(root, { [rel]: "inside\n" });
      scratch.write(outside, { [rel]: "OUTSIDE\n" });
      return { outside, outcome: afterNextResolve(() => swap(root, outside), () => read(join(root, rel), root)) };
    };

    test("a file swapped for a symlink after it was resolved: the open refuses the link (a race: tried again)", () => {
      const { outcome } = swappedWhileOpening("AGENTS.md", (root, outside) => {
        rmSync(join(root, "AGENTS.md"));
        symlinkSync(join(outside, "AGENTS.md"), join(root, "AGENTS.md"));
      });
      expect(outcome).toMatchObject({ kind: "skip", skip: { reason: "was replaced by a symlink while being opened", transient: true } });
    });

    test("a directory on the way swapped for a symlink out after the path was resolved: the opened file's real path is outside, refused", () => {
      const { outside, outcome } = swappedWhileOpening("a/AGENTS.md", (root, outside) => {
        renameSync(join(root, "a"), join(root, "moved"));
        symlinkSync(join(outside, "a"), join(root, "a"));
      });
      expect(reasonOf(outcome)).toBe(`resolves outside the worktree (${join(outside, "a/AGENTS.md")})`);
    });
  });
}
