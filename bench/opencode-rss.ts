/**
 * `bun bench/opencode-rss.ts [pairs]`: the RSS the plugin adds INSIDE the real OpenCode binary (no
 * target; bench/run.ts's bare-process figure is the one judged). Each run copies the 10,000-file
 * repo, starts `opencode run` against the scripted model server of tests/e2e, and plays the RSS
 * probe's session: 2,000 directories read 20 a step, then 20 steps of 4. Then a `sleep 3` tool call,
 * a full collection (a bench-only plugin loaded in both variants runs Bun.gc(true) when a bash call
 * names its marker), one second, and the RSS of OpenCode's process tree. Runs alternate with and
 * without the plugin; the result is the difference of the medians, written to bench/opencode-rss.json.
 * About 90-200 s a run.
 */
import { execFileSync, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isolatedEnv } from "../tests/e2e/harness.ts";
import { startModelServer, type ScriptStep } from "../tests/e2e/model-server.ts";
import { treeRss } from "./proc.ts";
import { generateTree, Rng } from "./tree.ts";

const REPO = join(import.meta.dir, "..");
const MARKER = "__bench_rss_probe__";
const COLLECTOR = `export const Collector = async () => ({
  "tool.execute.before": async (input, output) => {
    if (input.tool === "bash" && String(output.args?.command).includes(${JSON.stringify(MARKER)})) Bun.gc(true);
  },
});\n`;

async function run(withPlugin: boolean): Promise<{ rssMiB: number; seconds: number; carried: number }> {
  const tree = generateTree(10_000, 42);
  const root = mkdtempSync(join(tmpdir(), "pc-opencode-rss-"));
  const [dir, home, tmp] = ["project", "home", "tmp"].map((name) => join(root, name)) as [string, string, string];
  const server = startModelServer();
  try {
    mkdirSync(tmp, { recursive: true });
    execFileSync("cp", ["-a", tree.root, dir]);
    const collector = join(root, "collector.ts");
    writeFileSync(collector, COLLECTOR);
    // As tests/e2e/harness.ts does: OpenCode finds @opencode-ai/plugin installed and installs nothing.
    const config = join(home, ".config/opencode");
    const version = (JSON.parse(readFileSync(join(REPO, "node_modules/@opencode-ai/plugin/package.json"), "utf8")) as { version: string }).version;
    const dependencies = { "@opencode-ai/plugin": version };
    mkdirSync(join(config, "node_modules/@opencode-ai"), { recursive: true });
    symlinkSync(join(REPO, "node_modules/@opencode-ai/plugin"), join(config, "node_modules/@opencode-ai/plugin"));
    writeFileSync(join(config, "package.json"), JSON.stringify({ dependencies }));
    writeFileSync(join(config, "package-lock.json"), JSON.stringify({ lockfileVersion: 3, packages: { "": { dependencies } } }));
    const plugin = [...(withPlugin ? [[`file://${join(REPO, "plugin/index.ts")}`, {}]] : []), `file://${collector}`];
    const model = { name: "m1", tool_call: true, limit: { context: 10_000_000, output: 4_000 } };
    writeFileSync(join(dir, "opencode.json"), JSON.stringify({
      model: "mock/m1", small_model: "mock/m1", autoupdate: false, share: "disabled", lsp: false, snapshot: false, formatter: false,
      permission: { edit: "allow", bash: "allow", webfetch: "deny", external_directory: "allow" },
      plugin,
      provider: { mock: { npm: "@ai-sdk/openai-compatible", options: { baseURL: server.baseURL, apiKey: "scripted" }, models: { m1: model } } },
    }));

    let pid = 0;
    let rssMiB = NaN;
    const read = (id: number) => ({ tool: "read", args: { filePath: join(dir, tree.dirs[id] as string, "index.ts") } });
    const touched = tree.touchOrder.slice(0, 2000);
    const steps: ScriptStep[] = [];
    for (let i = 0; i < touched.length; i += 20) steps.push({ toolCalls: touched.slice(i, i + 20).map(read) });
    const rng = new Rng(5);
    for (let i = 0; i < 20; i++) steps.push({ toolCalls: [0, 1, 2, 3].map(() => read(rng.pick(touched))) });
    steps.push({ toolCalls: [{ tool: "bash", args: { command: "sleep 3", description: "settle" } }] });
    steps.push({ toolCalls: [{ tool: "bash", args: { command: `echo ${MARKER}`, description: "collect" } }] });
    steps.push(async () => {
      await Bun.sleep(1000);
      rssMiB = treeRss(pid, true) / 2 ** 20;
      return { text: "done" };
    });
    server.play(steps);
    const began = performance.now();
    const child = spawn(join(REPO, "node_modules/.bin/opencode"), ["run", "--model", "mock/m1", "Work through the packages."], {
      cwd: dir,
      env: { ...isolatedEnv(home, dir, tmp), PWD: dir },
      stdio: ["ignore", "ignore", "ignore"],
    });
    pid = child.pid ?? 0;
    await new Promise((resolve) => child.once("exit", resolve));
    if (server.pendingSteps() > 0 || Number.isNaN(rssMiB)) throw new Error(`the script did not play (${server.pendingSteps()} steps left)`);
    const carried = server.mainRequests().filter((request) => JSON.stringify(request.body).includes("<project-context")).length;
    return { rssMiB, seconds: (performance.now() - began) / 1000, carried };
  } finally {
    await server.stop();
    rmSync(root, { recursive: true, force: true });
  }
}

const pairs = Number(process.argv[2] ?? 3);
const began = { date: new Date().toISOString(), loadAverage: loadavg().map((load) => Number(load.toFixed(2))) };
const commit = Bun.spawnSync(["git", "rev-parse", "--short", "HEAD"], { cwd: REPO }).stdout.toString().trim();
const runs: Record<"with" | "without", number[]> = { with: [], without: [] };
for (let i = 0; i < pairs; i++) {
  for (const withPlugin of i % 2 === 0 ? [true, false] : [false, true]) {
    const result = await run(withPlugin);
    runs[withPlugin ? "with" : "without"].push(result.rssMiB);
    console.error(`${withPlugin ? "with" : "without"} the plugin: ${result.rssMiB.toFixed(1)} MiB (${result.seconds.toFixed(0)} s, ${result.carried} requests carried context)`);
  }
}
const median = (values: number[]) => values.slice().sort((a, b) => a - b)[Math.floor((values.length - 1) / 2)] ?? NaN;
const result = { ...began, commit, opencode: (JSON.parse(readFileSync(join(REPO, "node_modules/opencode-ai/package.json"), "utf8")) as { version: string }).version, runsMiB: runs, addedMiB: median(runs.with) - median(runs.without) };
writeFileSync(join(import.meta.dir, "opencode-rss.json"), `${JSON.stringify(result, null, 2)}\n`);
console.log(JSON.stringify(result));
