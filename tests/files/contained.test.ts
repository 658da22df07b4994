import { afterEach, describe, expect, test } from "bun:test";
import { closeSync, mkdirSync, openSync, readlinkSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { spawnSync } from "node:child_process";
import { readContained } from "../../plugin/files/contained.ts";
import { Scratch } from "./helpers.ts";

const scratch = new Scratch();
afterEach(() => scratch.cleanup());
const MAX = 1024;

describe("readContained", () => {
  test("reads a file: raw, body, frontmatter, sha256, rel, frozen", () => {
    const root = scratch.dir();
    scratch.write(root, { "a/AGENTS.md": "---\nroot: true\n---\n# A\n" });
    const outcome = readContained(join(root, "a/AGENTS.md"), join(root, "a"), root, MAX);
    if (outcome.kind !== "file") throw new Error(`expected a file, got ${JSON.stringify(outcome)}`);
    const { version } = outcome;
    expect(version).toMatchObject({ path: join(root, "a/AGENTS.md"), dir: join(root, "a"), rel: "a/AGENTS.md", body: "# A\n", root: true, truncated: false });
    expect(version.raw).toBe("---\nroot: true\n---\n# A\n");
    expect(version.sha256).toBe(new Bun.CryptoHasher("sha256").update(version.raw).digest("hex"));
    expect(Object.isFrozen(version)).toBe(true);
  });

  test("frontmatter that runs past maxFileBytes is refused, never sent as text (found by a hostile run)", () => {
    const root = scratch.dir();
    const keys = Array.from({ length: 200 }, (_, i) => `k${i}: value-${i}`).join("\n");
    scratch.write(root, {
      "a/AGENTS.md": `---\ninclude: manual\n${keys}\n---\n# A\n`,
      // A file opening with a rule it closes within the cut, and one that never opens a block, read as ever.
      "b/AGENTS.md": `---\ninclude: manual\n---\n${"x".repeat(2 * MAX)}\n`,
      "c/AGENTS.md": `# C\n${"y".repeat(2 * MAX)}\n`,
      // A block of keys none of which this plugin knows (within the cut) is frontmatter too.
      "d/AGENTS.md": `---\n${keys}\n---\n# D\n`,
      // A `---` rule followed by content, cut: content, not a block that never closes (found in review).
      "e/AGENTS.md": `---\n# Rules\n${"- use pnpm, not npm\n".repeat(400)}`,
    });
    const cut = readContained(join(root, "a/AGENTS.md"), join(root, "a"), root, MAX);
    expect(cut.kind === "skip" && cut.skip.reason).toBe(`its frontmatter runs past the first ${MAX} bytes (option maxFileBytes)`);
    const closed = readContained(join(root, "b/AGENTS.md"), join(root, "b"), root, MAX);
    expect(closed.kind === "file" && closed.version.frontmatter).toEqual({ include: "manual" });
    expect(readContained(join(root, "c/AGENTS.md"), join(root, "c"), root, MAX).kind).toBe("file");
    const keysOnly = readContained(join(root, "d/AGENTS.md"), join(root, "d"), root, MAX);
    expect(keysOnly.kind === "skip" && keysOnly.skip.reason).toBe(`its frontmatter runs past the first ${MAX} bytes (option maxFileBytes)`);
    const rule = readContained(join(root, "e/AGENTS.md"), join(root, "e"), root, MAX);
    expect(rule.kind === "file" && rule.version.body.startsWith("---\n# Rules\n- use pnpm")).toBe(true);
  });

  test("a candidate that is a symlink to a file inside the worktree is read from its target", () => {
    const root = scratch.dir();
    scratch.write(root, { "shared/rules.md": "# shared\n" });
    mkdirSync(join(root, "a"));
    symlinkSync("../shared/rules.md", join(root, "a/AGENTS.md"));
    const outcome = readContained(join(root, "a/AGENTS.md"), join(root, "a"), root, MAX);
    expect(outcome.kind === "file" && outcome.version.path).toBe(join(root, "shared/rules.md"));
  });

  test("the opened descriptor names the file through /proc/self/fd (the path every check is made on)", () => {
    const root = scratch.dir();
    scratch.write(root, { "AGENTS.md": "x" });
    const fd = openSync(join(root, "AGENTS.md"), "r");
    try {
      expect(readlinkSync(`/proc/self/fd/${fd}`)).toBe(join(root, "AGENTS.md"));
    } finally {
      closeSync(fd);
    }
  });

  test("not a regular file, binary, invalid UTF-8, missing: skipped or absent, never a hang", () => {
    const root = scratch.dir();
    mkdirSync(join(root, "dir/AGENTS.md"), { recursive: true });
    writeFileSync(join(root, "bin.md"), new Uint8Array([0x41, 0, 0x42]));
    writeFileSync(join(root, "bad.md"), new Uint8Array([0x41, 0xff, 0x42]));
    spawnSync("mkfifo", [join(root, "fifo.md")]);
    const reason = (path: string) => {
      const outcome = readContained(join(root, path), root, root, MAX);
      return outcome.kind === "skip" ? outcome.skip.reason : outcome.kind;
    };
    expect(reason("dir/AGENTS.md")).toBe("not a regular file");
    expect(reason("fifo.md")).toBe("not a regular file");
    expect(reason("bin.md")).toContain("binary");
    expect(reason("bad.md")).toContain("UTF-8");
    expect(reason("none.md")).toBe("absent");
  });

  test("a file past maxFileBytes is cut, never inside a character, and says so", () => {
    const root = scratch.dir();
    // 1023 ASCII bytes then a 3-byte character straddling the 1024-byte cap.
    scratch.write(root, { "AGENTS.md": `${"a".repeat(1023)}€tail` });
    const outcome = readContained(join(root, "AGENTS.md"), root, root, MAX);
    if (outcome.kind !== "file") throw new Error("expected a file");
    expect(outcome.version.truncated).toBe(true);
    expect(outcome.version.raw).toBe("a".repeat(1023));
    expect(outcome.notes.join()).toContain("maxFileBytes");
  });
});
