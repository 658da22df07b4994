// Runs the real OpenCode binary against a copy of a fixture project, isolated from the machine:
// its own HOME/XDG dirs, its own git repo, a scripted model server as the only provider.

import { spawn, spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { startModelServer, type ModelServer } from "./model-server.ts";

const REPO_ROOT = resolve(import.meta.dir, "../..");
const OPENCODE_BIN = join(REPO_ROOT, "node_modules/.bin/opencode");
const PLUGIN_ENTRY = join(REPO_ROOT, "plugin/index.ts");
const FIXTURE = join(REPO_ROOT, "tests/fixtures/e2e-monorepo");
const MODEL_ID = "mock/m1";
const PLUGIN_PACKAGE_VERSION: string = (
  (await Bun.file(join(REPO_ROOT, "node_modules/@opencode-ai/plugin/package.json")).json()) as { version: string }
).version;
/**
 * OpenCode's glob and grep run ripgrep: from PATH, else a download (which the isolated environment
 * refuses). Without it those tools fail, and a failed tool's output never passes the plugin.
 */
export const RIPGREP_ON_PATH = Bun.which("rg") !== null;
/** Bounds for one `opencode run`, for `opencode serve` to start listening, and for one HTTP call to it. */
const RUN_TIMEOUT_MS = 60_000;
const SERVE_START_TIMEOUT_MS = 30_000;
const HTTP_TIMEOUT_MS = 60_000;

/** The two ways a user loads the plugin. */
export type PluginLoading =
  /** `"plugin": [["file:///abs/plugin/index.ts", options]]` in opencode.json. */
  | { via: "config"; options?: Record<string, unknown> }
  /** `.opencode/plugin/project-context.ts`, a one-line re-export of the plugin. */
  | { via: "drop-in" };

export type ProjectSetup = {
  modelServer: ModelServer;
  plugin: PluginLoading;
  /** Model context window; a small one lets a test force compaction with one large reported usage. */
  contextLimit?: number;
};

export type RunResult = { exitCode: number | null; stdout: string; stderr: string; timedOut: boolean };

export type RunOptions = {
  /** `opencode run -c`: continue the last session. */
  continueLast?: boolean;
  /** Directory to start OpenCode in, relative to the project root (its session directory). */
  subdirectory?: string;
};

export type OpencodeServer = {
  createSession(): Promise<string>;
  /** Sends one user message to a session and resolves when the agent loop for it has finished. */
  prompt(sessionID: string, text: string): Promise<unknown>;
  stop(): Promise<void>;
};

export type E2EProject = {
  dir: string;
  run(message: string, options?: RunOptions): Promise<RunResult>;
  serve(): Promise<OpencodeServer>;
  cleanup(): void;
};

export function createProject(setup: ProjectSetup): E2EProject {
  const root = mkdtempSync(join(tmpdir(), "pc-e2e-"));
  const dir = join(root, "project");
  const home = join(root, "home");
  cpSync(FIXTURE, dir, { recursive: true });
  // The repo holds the fixture as committed; what the test harness adds stays untracked.
  initGitRepo(dir);
  writeConfig(dir, setup);
  seedPluginDependency(join(home, ".config/opencode"));
  if (setup.plugin.via === "drop-in") {
    writeDropIn(dir);
    seedPluginDependency(join(dir, ".opencode"));
  }

  // OpenCode's own temp files (each start unpacks a ~5.5 MB native library into TMPDIR) go under
  // the run's root too, so cleanup removes them with everything else.
  const tmp = join(root, "tmp");
  mkdirSync(tmp, { recursive: true });
  const env = isolatedEnv(home, dir, tmp);
  const children = new Set<ReturnType<typeof spawn>>();

  const spawnOpencode = (args: string[], subdirectory = "") => {
    const cwd = join(dir, subdirectory);
    // Own process group, so a timeout or cleanup can end OpenCode together with what it spawned.
    const child = spawn(OPENCODE_BIN, args, { cwd, env: { ...env, PWD: cwd }, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    children.add(child);
    child.once("exit", () => children.delete(child));
    return child;
  };

  return {
    dir,
    run(message, options = {}) {
      // OpenCode's log on stderr: the plugin logs through it, and a test reads its warnings and errors there.
      const args = ["run", "--print-logs", "--model", MODEL_ID, ...(options.continueLast ? ["--continue"] : []), message];
      return collectRun(spawnOpencode(args, options.subdirectory));
    },
    serve() {
      // `--port 0` still makes OpenCode try 4096 first, which concurrent servers would fight over.
      const port = String(freeLocalPort());
      return startServer(spawnOpencode(["serve", "--port", port, "--hostname", "127.0.0.1"]));
    },
    cleanup() {
      for (const child of children) killGroup(child);
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/**
 * Warnings and errors in OpenCode's log (a run's stderr, from `--print-logs`): the plugin logs
 * through `client.app.log`, and a run that went as planned logs neither.
 */
export function logProblems(result: RunResult): string[] {
  return result.stderr.split("\n").filter((line) => /\blevel=(WARN|ERROR)\b/.test(line));
}

/** A model server and a project that talks to it, closed together. */
export type Scenario = { server: ModelServer; project: E2EProject; close(): Promise<void> };

export function openScenario(setup: Omit<ProjectSetup, "modelServer">): Scenario {
  const server = startModelServer();
  const project = createProject({ ...setup, modelServer: server });
  return {
    server,
    project,
    async close() {
      project.cleanup();
      await server.stop();
    },
  };
}

/** What went wrong with the script: requests it did not cover, steps never played, steps that threw. */
function scriptProblems(server: ModelServer): string[] {
  return [
    server.unscriptedCount() > 0 ? `${server.unscriptedCount()} request(s) past the end of the script` : "",
    server.pendingSteps() > 0 ? `${server.pendingSteps()} script step(s) never played` : "",
    server.stepErrors.length > 0 ? `step errors: ${server.stepErrors.map(String).join("; ")}` : "",
  ].filter((problem) => problem !== "");
}

/** Fails when the script was not played exactly (a scenario judged on a derailed run proves nothing). */
export function assertScriptPlayed(server: ModelServer, what: string) {
  const problems = scriptProblems(server);
  if (problems.length > 0) throw new Error(`${what}: ${problems.join(", ")}`);
}

/** Fails with OpenCode's own output when a run did not end cleanly or did not play its script exactly. */
export function assertRunSucceeded(result: RunResult, server: ModelServer, what: string) {
  const problems = [
    result.timedOut ? "timed out" : "",
    result.exitCode !== 0 ? `exit code ${result.exitCode}` : "",
    ...scriptProblems(server),
  ].filter((problem) => problem !== "");
  if (problems.length > 0) {
    throw new Error(`${what}: ${problems.join(", ")}\n--- stdout\n${result.stdout}\n--- stderr\n${result.stderr}`);
  }
}

function writeConfig(dir: string, setup: ProjectSetup) {
  const plugin =
    setup.plugin.via === "config"
      ? [[`file://${PLUGIN_ENTRY}`, setup.plugin.options ?? {}]]
      : [];
  const config = {
    model: MODEL_ID,
    small_model: MODEL_ID,
    autoupdate: false,
    share: "disabled",
    lsp: false,
    snapshot: false,
    formatter: false,
    permission: { edit: "allow", bash: "allow", webfetch: "deny", external_directory: "allow" },
    plugin,
    provider: {
      mock: {
        npm: "@ai-sdk/openai-compatible",
        options: { baseURL: setup.modelServer.baseURL, apiKey: "scripted" },
        models: {
          m1: { name: "m1", tool_call: true, limit: { context: setup.contextLimit ?? 200_000, output: 4_000 } },
        },
      },
    },
  };
  writeFileSync(join(dir, "opencode.json"), JSON.stringify(config, null, 2));
}

function writeDropIn(dir: string) {
  const pluginDir = join(dir, ".opencode/plugin");
  mkdirSync(pluginDir, { recursive: true });
  writeFileSync(join(pluginDir, "project-context.ts"), `export { default } from ${JSON.stringify(PLUGIN_ENTRY)};\n`);
}

/**
 * OpenCode runs an npm install of @opencode-ai/plugin in every config dir (the global one and each
 * `.opencode/`) unless node_modules exists and package-lock.json already lists every dependency of
 * package.json. That install goes to the registry (5-7 s, and no network in tests), so seed both
 * files and link the repo's own copy of the package.
 */
function seedPluginDependency(configDir: string) {
  const dependencies = { "@opencode-ai/plugin": PLUGIN_PACKAGE_VERSION };
  mkdirSync(join(configDir, "node_modules/@opencode-ai"), { recursive: true });
  symlinkSync(join(REPO_ROOT, "node_modules/@opencode-ai/plugin"), join(configDir, "node_modules/@opencode-ai/plugin"));
  writeFileSync(join(configDir, "package.json"), JSON.stringify({ dependencies }));
  writeFileSync(join(configDir, "package-lock.json"), JSON.stringify({ lockfileVersion: 3, packages: { "": { dependencies } } }));
}

function initGitRepo(dir: string) {
  const git = (...args: string[]) => {
    const result = spawnSync("git", args, { cwd: dir, encoding: "utf8" });
    if (result.status !== 0) throw new Error(`git ${args.join(" ")} failed: ${result.stderr}`);
  };
  git("init", "--quiet", "--initial-branch=main");
  git("-c", "user.email=e2e@example.invalid", "-c", "user.name=e2e", "add", "-A");
  git("-c", "user.email=e2e@example.invalid", "-c", "user.name=e2e", "commit", "--quiet", "-m", "fixture");
}

export function isolatedEnv(home: string, projectDir: string, tmp: string): Record<string, string> {
  return {
    PATH: process.env["PATH"] ?? "/usr/bin:/bin",
    HOME: home,
    XDG_CONFIG_HOME: join(home, ".config"),
    XDG_DATA_HOME: join(home, ".local/share"),
    XDG_CACHE_HOME: join(home, ".cache"),
    XDG_STATE_HOME: join(home, ".local/state"),
    // OpenCode takes its directory from $PWD, not from the spawn cwd.
    PWD: projectDir,
    TMPDIR: tmp,
    OPENCODE_DISABLE_AUTOUPDATE: "1",
    OPENCODE_DISABLE_MODELS_FETCH: "1",
    OPENCODE_DISABLE_DEFAULT_PLUGINS: "1",
    OPENCODE_DISABLE_LSP_DOWNLOAD: "1",
    OPENCODE_DISABLE_SHARE: "1",
    OPENCODE_DISABLE_TERMINAL_TITLE: "1",
    // Anything that still reaches out (e.g. the ripgrep download glob/grep attempt when no `rg` is
    // on PATH) fails at once on a closed local port instead of leaving the machine.
    HTTP_PROXY: "http://127.0.0.1:9",
    HTTPS_PROXY: "http://127.0.0.1:9",
    NO_PROXY: "127.0.0.1,localhost",
  };
}

export function freeLocalPort(): number {
  const probe = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response() });
  const port = probe.port;
  probe.stop(true);
  if (port === undefined) throw new Error("could not get a free local port");
  return port;
}

function killGroup(child: ReturnType<typeof spawn>) {
  if (child.pid === undefined || child.exitCode !== null) return;
  try {
    process.kill(-child.pid, "SIGKILL");
  } catch {
    // Already gone between the check and the kill.
  }
}

function collectRun(child: ReturnType<typeof spawn>): Promise<RunResult> {
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolvePromise) => {
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup(child);
    }, RUN_TIMEOUT_MS);
    child.once("close", (exitCode) => {
      clearTimeout(timer);
      resolvePromise({ exitCode, stdout, stderr, timedOut });
    });
  });
}

function startServer(child: ReturnType<typeof spawn>): Promise<OpencodeServer> {
  let output = "";
  return new Promise((resolvePromise, reject) => {
    const timer = setTimeout(() => {
      killGroup(child);
      reject(new Error(`opencode serve did not report its address within ${SERVE_START_TIMEOUT_MS} ms:\n${output}`));
    }, SERVE_START_TIMEOUT_MS);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const address = /https?:\/\/127\.0\.0\.1:\d+/.exec(output)?.[0];
      if (!address) return;
      clearTimeout(timer);
      child.stdout?.off("data", onData);
      resolvePromise(serverClient(address, child));
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`opencode serve exited with ${code} before listening:\n${output}`));
    });
  });
}

function serverClient(url: string, child: ReturnType<typeof spawn>): OpencodeServer {
  const call = async (path: string, body: unknown) => {
    const response = await fetch(`${url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(HTTP_TIMEOUT_MS),
    });
    if (!response.ok) throw new Error(`POST ${path}: ${response.status} ${await response.text()}`);
    return response.json() as Promise<unknown>;
  };
  const [providerID, modelID] = MODEL_ID.split("/");
  return {
    async createSession() {
      const session = (await call("/session", {})) as { id: string };
      return session.id;
    },
    prompt(sessionID, text) {
      return call(`/session/${sessionID}/message`, {
        model: { providerID, modelID },
        parts: [{ type: "text", text }],
      });
    },
    async stop() {
      const exited = new Promise<void>((resolvePromise) => {
        if (child.exitCode !== null) resolvePromise();
        else child.once("exit", () => resolvePromise());
      });
      killGroup(child);
      await exited;
    },
  };
}
