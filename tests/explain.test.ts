import { describe, expect, test } from "bun:test";
import { join } from "node:path";

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

  test("a missing directory is a clear error", async () => {
    const { code, stderr } = await explain("no/such/dir");
    expect(code).toBe(2);
    expect(stderr).toContain("no such directory");
  });
});
