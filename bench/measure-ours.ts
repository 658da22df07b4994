/**
 * The plugin's own costs, driven through its hooks exactly as OpenCode calls them.
 */
import type { Plugin } from "@opencode-ai/plugin";
import { countTokens } from "gpt-tokenizer";
import type { TreeManifest } from "./generate.ts";
import { sourceFileOf } from "./generate.ts";
import { makePluginInput, requireHooks, startPlugin } from "./host.ts";
import type { Distribution } from "./stats.ts";
import { now, summarizeNs, timeEachAsync } from "./stats.ts";
import type { TouchPlan } from "./workload.ts";
import { chainDirIds, effectiveContextFiles, expectedInBlock, toolCallFor } from "./workload.ts";

/**
 * Between real steps the model takes seconds, so background work the plugin started (watcher
 * set-up, stat checks) has finished; let it finish here too, then collect garbage, so a series
 * measures the hook and not leftovers of the previous series.
 */
async function quiesce(): Promise<void> {
  await Bun.sleep(50);
  Bun.gc(true);
}

export interface WarmResult {
  touchedDirs: number;
  /** tool.execute.before for a directory the session had not touched yet. */
  newTouch: Distribution;
  /** First transform after all the touches (everything loaded for the first time). */
  firstTransformMs: number;
  warm: Distribution;
  /** tool.execute.before for already-touched directories, mixed tool shapes. */
  repeatTouch: Distribution;
  /** tool.execute.after for the same calls (the host runs it after every tool). */
  toolAfter: Distribution;
  /** The transform of a step that follows a tool call on an already-touched directory. */
  stepAfterTool: Distribution;
  compaction: Distribution;
  blockBytes: number;
  blockTokens: number;
  compactionTokens: number;
  /** Effective context files on the touched chains vs how many of their markers the block shows. */
  chainContextFiles: number;
  chainFilesShown: number;
  headerTokens: number;
}

export interface WarmOptions {
  warmIterations: number;
  warmup: number;
  repeatTouchIterations: number;
  compactionIterations: number;
  stepAfterToolIterations: number;
  fileNames: readonly string[];
  maxDepth: number;
}

export async function measureWarm(
  plugin: Plugin,
  manifest: TreeManifest,
  plan: TouchPlan,
  touchedDirs: number,
  options: WarmOptions,
): Promise<WarmResult> {
  const instance = await startPlugin(plugin, manifest.root);
  const session = instance.session();
  const dirIds = plan.order.slice(0, touchedDirs);
  const { toolBefore, systemTransform, compacting } = instance.hooks;

  Bun.gc(true);
  const newTouchSamples = new Float64Array(dirIds.length);
  for (let i = 0; i < dirIds.length; i++) {
    const call = toolCallFor(manifest, dirIds[i] as number, i);
    const input = { tool: call.tool, sessionID: session.sessionID, callID: `new_${i}` };
    const output = { args: call.args };
    const started = now();
    await toolBefore(input, output);
    newTouchSamples[i] = now() - started;
  }

  const firstStarted = now();
  const block = await session.transform();
  const firstTransformMs = (now() - firstStarted) / 1e6;
  // Let any asynchronous set-up the touches started (watchers) finish before the warm series,
  // so the warm numbers are the steady state and not set-up interleaved with requests.
  await Bun.sleep(touchedDirs >= 200 ? 300 : 50);
  await session.transform();

  await quiesce();
  const transformInput = session.transformInput();
  const warmSamples = await timeEachAsync(
    options.warmIterations,
    options.warmup,
    () => session.transformOutput(),
    (output) => systemTransform(transformInput, output),
  );

  await quiesce();
  const repeatCalls = Array.from({ length: Math.min(dirIds.length * 10, 1000) }, (_, i) =>
    toolCallFor(manifest, dirIds[i % dirIds.length] as number, i),
  );
  const repeatSamples = await timeEachAsync(
    options.repeatTouchIterations,
    Math.min(200, options.repeatTouchIterations),
    (i) => {
      const call = repeatCalls[i % repeatCalls.length] ?? repeatCalls[0];
      return { input: { tool: call?.tool ?? "read", sessionID: session.sessionID, callID: `rep_${i}` }, output: { args: call?.args ?? {} } };
    },
    ({ input, output }) => toolBefore(input, output),
  );

  await quiesce();
  const afterNs: number[] = [];
  const stepNs: number[] = [];
  for (let i = 0; i < options.stepAfterToolIterations + 20; i++) {
    const call = repeatCalls[i % repeatCalls.length] ?? repeatCalls[0];
    if (!call) break;
    const input = { tool: call.tool, sessionID: session.sessionID, callID: `step_${i}` };
    await toolBefore(input, { args: call.args });
    const afterOutput = { title: call.tool, output: "ok", metadata: {} };
    const transformOutput = session.transformOutput();
    const afterStarted = now();
    await instance.hooks.toolAfter({ ...input, args: call.args }, afterOutput);
    const stepStarted = now();
    await systemTransform(transformInput, transformOutput);
    const stepFinished = now();
    if (i >= 20) {
      afterNs.push(stepStarted - afterStarted);
      stepNs.push(stepFinished - stepStarted);
    }
  }

  await quiesce();
  let compactionContext: string[] = [];
  const compactionSamples = await timeEachAsync(
    options.compactionIterations,
    Math.min(20, options.compactionIterations),
    () => ({ context: [] as string[] }),
    async (output) => {
      await compacting({ sessionID: session.sessionID }, output);
      compactionContext = output.context;
    },
  );

  const finalBlock = await session.transform();
  const expected = effectiveContextFiles(manifest, expectedInBlock(manifest, chainDirIds(manifest, dirIds, options.maxDepth)), options.fileNames);
  const shown = expected.filter((file) => file.marker && finalBlock.includes(file.marker)).length;
  const result: WarmResult = {
    touchedDirs,
    newTouch: summarizeNs(newTouchSamples),
    firstTransformMs,
    warm: summarizeNs(warmSamples),
    repeatTouch: summarizeNs(repeatSamples),
    toolAfter: summarizeNs(afterNs),
    stepAfterTool: summarizeNs(stepNs),
    compaction: summarizeNs(compactionSamples),
    blockBytes: Buffer.byteLength(finalBlock || block),
    blockTokens: countTokens(finalBlock || block),
    compactionTokens: countTokens(compactionContext.join("\n\n")),
    chainContextFiles: expected.length,
    chainFilesShown: shown,
    headerTokens: countTokens(session.transformOutput().system[0] ?? ""),
  };
  await instance.hooks.dispose();
  return result;
}

export interface ColdChainResult {
  samples: number;
  touch: Distribution;
  firstTransform: Distribution;
  total: Distribution;
  /** Samples whose block showed the deepest file of the chain (the one nearest the touch). */
  deepestShown: number;
}

/**
 * "A new 10-level chain": a fresh plugin instance (nothing cached) touches a file at depth 9 whose
 * 10 directories all hold a context file; timed from the tool call to the end of the first
 * transform. Plugin construction is excluded (that is start-up). The OS page cache is warm: this
 * measures the plugin's work, not the disk.
 */
export async function measureColdChains(plugin: Plugin, manifest: TreeManifest, samples: number): Promise<ColdChainResult> {
  const touchNs: number[] = [];
  const transformNs: number[] = [];
  const totalNs: number[] = [];
  let deepestShown = 0;
  for (let i = 0; i < samples + 3; i++) {
    const leaf = manifest.deepChainLeaves[i % manifest.deepChainLeaves.length] as number;
    const instance = await startPlugin(plugin, manifest.root);
    const session = instance.session(`ses_cold_${i}`);
    const touchInput = session.touchInput();
    const touchOutput = { args: { filePath: sourceFileOf(manifest, leaf) } };
    const transformInput = session.transformInput();
    const transformOutput = session.transformOutput();
    Bun.gc(false);
    const started = now();
    await instance.hooks.toolBefore(touchInput, touchOutput);
    const touched = now();
    await instance.hooks.systemTransform(transformInput, transformOutput);
    const finished = now();
    if (i >= 3) {
      // The first instances pay for JIT warm-up of the plugin's code paths; skip them.
      touchNs.push(touched - started);
      transformNs.push(finished - touched);
      totalNs.push(finished - started);
      const marker = manifest.dirs[leaf]?.markers["AGENTS.md"];
      if (marker && transformOutput.system.slice(1).join("\n").includes(marker)) deepestShown++;
    }
    await instance.hooks.dispose();
  }
  return {
    samples,
    touch: summarizeNs(touchNs),
    firstTransform: summarizeNs(transformNs),
    total: summarizeNs(totalNs),
    deepestShown,
  };
}

export interface IncrementalColdResult {
  samples: number;
  baseTouchedDirs: number;
  total: Distribution;
  touch: Distribution;
  firstTransform: Distribution;
}

/** A new directory touched in a session that already works in `baseTouched` directories. */
export async function measureIncrementalCold(
  plugin: Plugin,
  manifest: TreeManifest,
  plan: TouchPlan,
  baseTouched: number,
  samples: number,
): Promise<IncrementalColdResult> {
  const instance = await startPlugin(plugin, manifest.root);
  const session = instance.session();
  for (const id of plan.order.slice(0, baseTouched)) await session.touch(sourceFileOf(manifest, id));
  await session.transform();
  await Bun.sleep(100);
  for (let i = 0; i < 50; i++) await session.transform();
  const touchNs: number[] = [];
  const transformNs: number[] = [];
  const totalNs: number[] = [];
  const spare = plan.spare.length > 0 ? plan.spare : plan.order.slice(baseTouched);
  for (let i = 0; i < Math.min(samples, spare.length); i++) {
    const touchInput = session.touchInput();
    const touchOutput = { args: { filePath: sourceFileOf(manifest, spare[i] as number) } };
    const transformInput = session.transformInput();
    const transformOutput = session.transformOutput();
    const started = now();
    await instance.hooks.toolBefore(touchInput, touchOutput);
    const touched = now();
    await instance.hooks.systemTransform(transformInput, transformOutput);
    const finished = now();
    touchNs.push(touched - started);
    transformNs.push(finished - touched);
    totalNs.push(finished - started);
    // Steady state between samples, as between real steps (the model takes seconds).
    await Bun.sleep(2);
  }
  await instance.hooks.dispose();
  return {
    samples: totalNs.length,
    baseTouchedDirs: baseTouched,
    total: summarizeNs(totalNs),
    touch: summarizeNs(touchNs),
    firstTransform: summarizeNs(transformNs),
  };
}

export interface InProcessStartup {
  /** ProjectContext(input, options) until the hooks object resolves, module already imported. */
  init: Distribution;
  dispose: Distribution;
}

export async function measureInProcessStartup(plugin: Plugin, manifest: TreeManifest, samples: number): Promise<InProcessStartup> {
  const initNs: number[] = [];
  const disposeNs: number[] = [];
  for (let i = 0; i < samples + 2; i++) {
    const input = makePluginInput(manifest.root);
    const started = now();
    const hooks = requireHooks(await plugin(input, {}));
    const ready = now();
    await hooks.dispose();
    const disposed = now();
    if (i >= 2) {
      initNs.push(ready - started);
      disposeNs.push(disposed - ready);
    }
  }
  return { init: summarizeNs(initNs), dispose: summarizeNs(disposeNs) };
}
