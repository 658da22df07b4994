// npm for the install tests, isolated from the machine's npm set-up: its own HOME, user config and
// cache under the test's temp directory, and none of the npm_config_* variables `npm test` sets.

import { spawn } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join, resolve } from "node:path";

export const REPO_ROOT = resolve(import.meta.dir, "../../..");
const NPM_TIMEOUT_MS = 120_000;

/** An environment for npm with HOME (hence ~/.npmrc and the cache) at `home`. */
export function npmEnv(home: string, extra: Record<string, string> = {}): Record<string, string> {
  mkdirSync(home, { recursive: true });
  return {
    PATH: process.env["PATH"] ?? "/usr/bin:/bin",
    HOME: home,
    TMPDIR: home,
    npm_config_cache: join(home, ".npm"),
    npm_config_userconfig: join(home, ".npmrc"),
    npm_config_update_notifier: "false",
    npm_config_fund: "false",
    npm_config_audit: "false",
    npm_config_loglevel: "error",
    ...extra,
  };
}

/** Runs npm; resolves to its stdout, rejects with its output when it fails. */
export function npm(args: string[], { cwd, env }: { cwd: string; env: Record<string, string> }): Promise<string> {
  const npmPath = Bun.which("npm");
  if (npmPath === null) throw new Error("no npm on PATH");
  const child = spawn(npmPath, args, { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolvePromise, reject) => {
    const timer = setTimeout(() => child.kill("SIGKILL"), NPM_TIMEOUT_MS);
    child.once("close", (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolvePromise(stdout);
      else reject(new Error(`npm ${args.join(" ")} failed (${code ?? signal}):\n${stdout}\n${stderr}`));
    });
  });
}
