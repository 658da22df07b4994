import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";

const repo = join(import.meta.dir, "..");
const bun = process.execPath;

async function explain(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const child = Bun.spawn([bun, join(repo, "bin/explain.ts"), ...args], { cwd: repo, stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
  return { code, stdout, stderr };
}

describe("explain", () => {
  test("prints the files that apply with tokens, tier and reasons, then the system block, what rides on each tool call, and the compaction copy", async () => {
    const { code, stdout } = await explain("tests/fixtures/monorepo", "--worktree", "tests/fixtures/monorepo", "--touch", "services/api/plugins/payments/src/charge.ts");
    expect(code).toBe(0);
    expect(stdout).toMatch(/ {2}AGENTS\.md {2}touched {2}\d+ tokens {2}tier \d+ {2}in OpenCode's own prompt/);
    expect(stdout).toMatch(/services\/api\/plugins\/payments\/AGENTS\.md {2}touched {2}\d+ tokens {2}tier 0 {2}whole in a system-delivery block; applies to services\/api\/plugins\/payments\/src\/charge\.ts/);
    const [tree, system, ride, copy] = stdout.split(/\n(?=The system block at|Appended to the output|The compaction copy)/);
    expect(tree).not.toContain("Web app");
    expect(system).toContain("(nothing: every file that applies is already in OpenCode's own prompt)");
    expect(ride).toContain('<context-file path="services/api/AGENTS.md">');
    expect(ride).not.toContain('<context-file path="AGENTS.md">');
    expect(copy).toMatch(/^The compaction copy \(\d+ of 1000 tokens\):\n<project-context>/);
  });

  test("--no-host shows the block for a host that injects nothing itself", async () => {
    const { stdout } = await explain("tests/fixtures/monorepo", "--worktree", "tests/fixtures/monorepo", "--no-host");
    expect(stdout).toContain('<context-file path="AGENTS.md">');
  });

  test("a directory or worktree that is none, a worktree not holding the directory, or a value it cannot take is a clear error, never a report on other values (found in a hunt)", async () => {
    const cases: [string[], string][] = [
      [["README.md"], "no such directory: README.md"],
      [["tests/fixtures/monorepo", "--worktree", "/no/such/dir"], "no such directory: /no/such/dir"],
      [["tests/fixtures/monorepo", "--worktree", "tests/fixtures/monorepo/apps"], "does not hold"],
      [["tests/fixtures/monorepo", "--system-tokens", "lots"], "--system-tokens takes a whole number of tokens"],
      [["tests/fixtures/monorepo", "--system-tokens="], "--system-tokens takes a whole number of tokens"],
      [["tests/fixtures/monorepo", "--delivery", "sytem"], 'option "delivery" is invalid'],
    ];
    for (const [args, message] of cases) {
      const { code, stdout, stderr } = await explain(...args);
      expect({ args, code, stdout, error: stderr.includes(message) }).toEqual({ args, code: 2, stdout: "", error: true });
    }
  });

  test("a worktree given through a symlink is the same worktree: touches in it count (found in a hunt)", async () => {
    const link = join(mkdtempSync(join(tmpdir(), "opc-explain-")), "link");
    symlinkSync(join(repo, "tests/fixtures/monorepo"), link);
    try {
      const { code, stdout } = await explain("tests/fixtures/monorepo", "--worktree", link, "--touch", "services/api/plugins/payments/src/charge.ts");
      expect(code).toBe(0);
      expect(stdout).toContain("services/api/plugins/payments/AGENTS.md  touched");
    } finally {
      rmSync(dirname(link), { recursive: true, force: true });
    }
  });

  test("a missing directory is a clear error", async () => {
    const { code, stderr } = await explain("no/such/dir");
    expect(code).toBe(2);
    expect(stderr).toContain("no such directory");
  });
});
