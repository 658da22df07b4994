/**
 * Runs one bench scenario in a loop so a CPU profile shows what dominates it:
 *   bun --cpu-prof-md --cpu-prof-dir=/tmp/prof bench/profile.ts <scenario> [contextFiles]
 * Scenarios: cold-chain (fresh instance, touch a 10-level chain, first transform),
 *            new-dir (new directory in a 200-directory session),
 *            step-after-tool (tool call + tool.execute.after + transform, 2,000 directories),
 *            first-transform (2,000 directories touched, then the first transform),
 *            compaction (compaction hook, 200 directories).
 */
import { generateTree, sourceFileOf } from "./generate.ts";
import { loadPlugin, startPlugin } from "./host.ts";
import { planTouches, toolCallFor } from "./workload.ts";

const scenario = process.argv[2] ?? "cold-chain";
const contextFiles = Number(process.argv[3] ?? 1000);
const manifest = generateTree({ contextFiles, seed: 42 });
const plan = planTouches(manifest, 42);
const plugin = await loadPlugin();

async function sessionWith(touched: number) {
  const instance = await startPlugin(plugin, manifest.root);
  const session = instance.session();
  for (const id of plan.order.slice(0, touched)) await session.touch(sourceFileOf(manifest, id));
  await session.transform();
  return { instance, session };
}

const started = performance.now();
let runs = 0;
switch (scenario) {
  case "cold-chain":
    for (; runs < 200; runs++) {
      const instance = await startPlugin(plugin, manifest.root);
      const session = instance.session();
      const leaf = manifest.deepChainLeaves[runs % manifest.deepChainLeaves.length] ?? 0;
      await session.touch(sourceFileOf(manifest, leaf));
      await session.transform();
      await instance.hooks.dispose();
    }
    break;
  case "new-dir": {
    const { instance, session } = await sessionWith(200);
    for (; runs < Math.min(300, plan.spare.length); runs++) {
      await session.touch(sourceFileOf(manifest, plan.spare[runs] ?? 0));
      await session.transform();
    }
    await instance.hooks.dispose();
    break;
  }
  case "step-after-tool": {
    const { instance, session } = await sessionWith(2000);
    for (; runs < 200; runs++) {
      const call = toolCallFor(manifest, plan.order[runs % 2000] ?? 0, runs);
      await session.toolCall(call.tool, call.args);
      await session.transform();
    }
    await instance.hooks.dispose();
    break;
  }
  case "first-transform":
    for (; runs < 5; runs++) {
      const { instance } = await sessionWith(2000);
      await instance.hooks.dispose();
    }
    break;
  case "compaction": {
    const { instance, session } = await sessionWith(200);
    for (; runs < 500; runs++) await session.compact();
    await instance.hooks.dispose();
    break;
  }
  default:
    throw new Error(`unknown scenario ${scenario}`);
}
console.log(`${scenario} at ${contextFiles} files: ${runs} runs, ${((performance.now() - started) / runs).toFixed(2)} ms per run`);
process.exit(0);
