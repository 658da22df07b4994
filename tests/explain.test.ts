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
  test("prints the tree of files that apply with token counts and reasons, then the exact block", async () => {
    const { code, stdout } = await explain("tests/fixtures/monorepo", "--worktree", "tests/fixtures/monorepo", "--touch", "services/api/plugins/payments/src/charge.ts");
    expect(code).toBe(0);
    expect(stdout).toMatch(/AGENTS\.md {2}\d+ tokens {2}injected by OpenCode itself/);
    expect(stdout).toMatch(/services\/api\/plugins\/payments\/AGENTS\.md {2}\d+ tokens {2}in the block; applies to touched services\/api\/plugins\/payments\/src\/charge\.ts/);
    const [tree, block, copy] = stdout.split(/\n(?=The block the model gets|The compaction copy)/);
    expect(tree).not.toContain("Web app");
    expect(block).toContain('<context-file path="services/api/AGENTS.md">');
    expect(block).not.toContain('<context-file path="AGENTS.md">');
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
