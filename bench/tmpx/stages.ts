import { pluginInput, pluginPath, Session } from "../host.ts";
import { loadTree, toolCall } from "../tree.ts";
const tree = loadTree("/tmp/opencode-project-context-bench/v7-files-10000-seed-42");
import { readFileSync } from "node:fs";
import { heapStats } from "bun:jsc";
function kinds() { const sums = { code: 0, jit: 0, rest: 0 }; let kind: keyof typeof sums = "rest";
  for (const line of readFileSync("/proc/self/smaps", "utf8").split("\n")) { const m = /^[0-9a-f]+-[0-9a-f]+ (\S+) \S+ \S+ \S+\s*(.*)$/.exec(line); const r = m === null ? /^Rss:\s+(\d+) kB/.exec(line) : null;
    if (m !== null) kind = m[1] === "rwxp" ? "jit" : m[1] === "r-xp" && m[2] !== "" ? "code" : "rest"; else if (r !== null) sums[kind] += Number(r[1]) / 1024; }
  return sums; }
const mark = async (label: string) => { Bun.gc(true); await Bun.sleep(300); Bun.gc(true); const k = kinds(); const h = heapStats(); console.log(label.padEnd(20), (process.memoryUsage().rss / 2 ** 20).toFixed(1), "code", k.code.toFixed(1), "jit", k.jit.toFixed(1), "rest", k.rest.toFixed(1), "heap", (h.heapSize/2**20).toFixed(1), "cap", (h.heapCapacity/2**20).toFixed(1)); };
await mark("start");
const { ProjectContext } = await import(pluginPath());
await mark("imported");
const hooks = await ProjectContext(pluginInput(tree.root), {});
await mark("ProjectContext");
const session = new Session(hooks, tree.root);
await session.userMessage("Look around.");
await mark("userMessage"); console.log(Bun.spawnSync(["ps","--ppid",String(process.pid),"-o","pid,rss,args"]).stdout.toString());
await session.request();
await mark("first request");
await session.tools([toolCall(tree, tree.touchOrder[0]!, 0)]); await session.request(session.prepare());
await mark("step 1");
for (let i = 1; i < 21; i++) { await session.tools([toolCall(tree, tree.touchOrder[i]!, 0)]); await session.request(session.prepare()); }
await mark("step 21");
console.log(Object.keys(require.cache).filter((k) => k.includes("node_modules")).map((k) => k.replace(/.*node_modules\//, "")).join("\n"));
process.exit(0);
