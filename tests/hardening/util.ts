import type { Hooks } from "@opencode-ai/plugin";
import { chmod, mkdir, mkdtemp, realpath, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import type { Report, Script } from "./child/runner.ts";

export const BUN = join(import.meta.dir, "..", "..", "node_modules", ".bin", "bun");
export const RUNNER = join(import.meta.dir, "child", "runner.ts");
const EXITED_AT = "PC-CHILD-EXITED-AT:";

/** Text that must never reach a block: it lives only outside the worktree. */
export const MARKERS = {
  /** In the worktree's parent directory: only a walk above the worktree would find it. */
  parent: "MARKER-PARENT-5f2c1e",
  /** In a directory next to the worktree that symlinks inside the worktree point to. */
  outside: "MARKER-OUTSIDE-8d41a7",
  outsideClaude: "MARKER-OUTSIDE-CLAUDE-b03e99",
  outsideNested: "MARKER-OUTSIDE-NESTED-77aa10",
} as const;

export interface Sandbox {
  /** A temp directory holding the worktree and the hostile outside. */
  parent: string;
  /** The worktree. */
  repo: string;
  /** A directory next to it, only reachable through symlinks. */
  outside: string;
  cleanup(): Promise<void>;
}

/**
 * A worktree with context files outside it that must never be read: one in its parent (found only
 * by walking above the worktree) and several in a sibling directory that symlinks inside the
 * worktree point to (files, directories, a directory named AGENTS.md), plus symlink loops.
 */
export async function sandbox(): Promise<Sandbox> {
  const parent = await realpath(await mkdtemp(join(tmpdir(), "pc-hardening-")));
  const repo = join(parent, "repo");
  const outside = join(parent, "outside");
  const put = async (path: string, text: string) => {
    await mkdir(dirname(path), { recursive: true });
    await writeFile(path, text);
  };
  await put(join(parent, "AGENTS.md"), `# parent\n${MARKERS.parent}\n`);
  await put(join(outside, "AGENTS.md"), `# outside\n${MARKERS.outside}\n`);
  await put(join(outside, "CLAUDE.md"), `# outside claude\n${MARKERS.outsideClaude}\n`);
  await put(join(outside, "nested", "AGENTS.md"), `# outside nested\n${MARKERS.outsideNested}\n`);
  await put(join(outside, "nested", "code.ts"), "export {};\n");

  await put(join(repo, "AGENTS.md"), "# repo root\nROOT-RULES\n");
  await put(join(repo, "src", "AGENTS.md"), "# src\nSRC-RULES\n");
  await put(join(repo, "src", "index.ts"), "export {};\n");
  await put(join(repo, "src", "deep", "er", "file.ts"), "export {};\n");
  await put(join(repo, "docs", "CLAUDE.md"), "# docs\nDOCS-RULES\n");
  // Context files that are symlinks out of the worktree, by absolute and by relative target.
  await mkdir(join(repo, "linked-file"), { recursive: true });
  await symlink(join(outside, "AGENTS.md"), join(repo, "linked-file", "AGENTS.md"));
  await mkdir(join(repo, "linked-rel"), { recursive: true });
  await symlink("../../outside/CLAUDE.md", join(repo, "linked-rel", "CLAUDE.md"));
  // A directory symlinked out: anything below it is outside.
  await symlink(outside, join(repo, "linked-dir"));
  await symlink("../outside/nested", join(repo, "linked-nested"));
  // AGENTS.md that is a symlink to a directory outside.
  await mkdir(join(repo, "agents-dir-link"), { recursive: true });
  await symlink(join(outside, "nested"), join(repo, "agents-dir-link", "AGENTS.md"));
  // Loops: two links pointing at each other, one pointing at itself, a directory loop.
  await mkdir(join(repo, "loops"), { recursive: true });
  await symlink("CLAUDE.md", join(repo, "loops", "AGENTS.md"));
  await symlink("AGENTS.md", join(repo, "loops", "CLAUDE.md"));
  await symlink("self", join(repo, "loops", "self"));
  await symlink(".", join(repo, "loops", "here"));
  await symlink("..", join(repo, "loops", "up"));
  // Context files that are links to devices and process files: outside, never opened.
  await mkdir(join(repo, "devices"), { recursive: true });
  await symlink("/dev/zero", join(repo, "devices", "AGENTS.md"));
  await symlink("/proc/self/environ", join(repo, "devices", "CLAUDE.md"));
  // A link to the worktree's parent: everything through it is outside.
  await symlink("..", join(repo, "escape"));
  // Let a child process running as another user in.
  for (const dir of [parent, repo, outside]) await chmod(dir, 0o755);
  return { parent, repo, outside, cleanup: () => rm(parent, { recursive: true, force: true }) };
}

/** Every marker of the outside that appears in `text`. */
export function leakedMarkers(text: string): string[] {
  return Object.values(MARKERS).filter((marker) => text.includes(marker));
}

/** Runs `tool.execute.after` as OpenCode does after a tool. */
export async function after(hooks: Hooks, sessionID: string, tool: unknown, args: unknown, output = ""): Promise<{ output: string }> {
  const out = { title: "", output, metadata: {} };
  await hooks["tool.execute.after"]!({ tool: tool as string, sessionID, callID: `after-${Math.random()}`, args }, out);
  return out;
}

export interface ChildRun {
  report: Report | undefined;
  /** Exit code, or null if it had to be killed. */
  exitCode: number | null;
  /** Milliseconds from spawn to exit (or to the kill). */
  ms: number;
  /** Milliseconds from the report (the child's last act) to the process's exit. */
  exitAfterReportMs: number | undefined;
  stdout: string;
  stderr: string;
}

/**
 * Runs the plugin in a child process on `script`. `prefix` wraps the command (setpriv, strace…).
 * The child is killed after `timeoutMs` (exitCode null then): a test asserting the child ended on
 * its own checks `exitCode !== null`.
 */
export async function runChild(script: Script, { prefix = [] as string[], timeoutMs = 15_000, env = {} as Record<string, string> } = {}): Promise<ChildRun> {
  const dir = await mkdtemp(join(tmpdir(), "pc-child-"));
  await chmod(dir, 0o777);
  const file = join(dir, "script.json");
  await writeFile(file, JSON.stringify(script));
  await chmod(file, 0o644);
  const began = performance.now();
  // The exit time is taken by a shell around the child, not by this process, whose event loop may be
  // busy with other tests: exitAfterReportMs must measure the child, not the test runner.
  const wrapped = ["sh", "-c", `"$0" "$@"; status=$?; echo "${EXITED_AT}$(date +%s%N)" >&2; exit $status`, BUN, RUNNER, file];
  const child = Bun.spawn([...prefix, ...wrapped], {
    stdout: "pipe",
    stderr: "pipe",
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: dir, TMPDIR: dir, BUN_RUNTIME_TRANSPILER_CACHE_PATH: "0", ...env },
  });
  let killed = false;
  const timer = setTimeout(() => {
    killed = true;
    child.kill("SIGKILL");
  }, timeoutMs);
  const [stdout, rawStderr] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text()]);
  const code = await child.exited;
  const ms = performance.now() - began;
  const exitedAt = Number(new RegExp(`^${EXITED_AT}(\\d+)$`, "m").exec(rawStderr)?.[1] ?? Number.NaN) / 1e6;
  const stderr = rawStderr.replace(new RegExp(`^${EXITED_AT}\\d+\n?`, "m"), "");
  clearTimeout(timer);
  await rm(dir, { recursive: true, force: true });
  const line = stdout.trim().split("\n").pop() ?? "";
  let report: Report | undefined;
  try {
    report = JSON.parse(line) as Report;
  } catch {
    report = undefined;
  }
  const reportedAt = report?.reportedAt;
  const exitAfterReportMs = reportedAt === undefined || Number.isNaN(exitedAt) ? undefined : exitedAt - reportedAt;
  return { report, exitCode: killed ? null : code, ms, exitAfterReportMs, stdout, stderr };
}

/** A user other than root to run a child as, with the command prefix that does it, or undefined. */
export function nonRootPrefix(): string[] | undefined {
  if (process.getuid?.() !== 0) return [];
  const setpriv = Bun.which("setpriv");
  if (setpriv === null) return undefined;
  // nobody/nogroup: 65534 on Debian-like systems.
  return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"];
}
