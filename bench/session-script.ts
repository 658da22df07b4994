/**
 * A long scripted session, to see what the plugin does to the prompt over time: tokens injected per
 * request and how many requests keep a byte-identical block (each change invalidates the provider's
 * prompt cache from the block on, since OpenCode marks the first two system messages for caching).
 *
 * The script (seeded) works in "tasks": each picks an area of the repo (a directory at depth 2–4),
 * sometimes returning to an earlier one, and runs 8–25 steps there; every step makes 0–3 tool
 * calls, mostly on directories the task already touched, sometimes on a new one below the area.
 * One compaction happens half-way. Changes are split into unavoidable ones (the set of context
 * files on the touched chains grew) and the rest.
 */
import type { Plugin } from "@opencode-ai/plugin";
import { countTokens } from "gpt-tokenizer";
import type { TreeManifest } from "./generate.ts";
import { startPlugin } from "./host.ts";
import { SeededRandom } from "./random.ts";
import type { Distribution } from "./stats.ts";
import { summarizeNs } from "./stats.ts";
import { chainDirIds, effectiveContextFiles, toolCallFor } from "./workload.ts";

export interface SessionResult {
  requests: number;
  toolCalls: number;
  touchedDirs: number;
  identicalToPrevious: number;
  changed: number;
  /** Changes on requests where the set of applicable context files grew. */
  unavoidableChanges: number;
  /** Changes with no new applicable file (re-ordering, re-budgeting, or a compaction). */
  otherChanges: number;
  /** On changed requests, the share of the previous block kept as a common prefix (mean). */
  meanPrefixKept: number;
  tokensPerRequest: Distribution;
  compactionContextTokens: number;
}

interface Step {
  calls: Array<{ tool: string; args: Record<string, unknown> }>;
  compactBefore: boolean;
  /** Touched directory ids after this step's calls, for the unavoidable-change count. */
  touchedAfter: number[];
}

function buildScript(manifest: TreeManifest, requests: number, seed: number): Step[] {
  const random = new SeededRandom(seed + 101);
  const children: number[][] = manifest.dirs.map(() => []);
  manifest.dirs.forEach((dir, id) => {
    if (dir.parent >= 0) children[dir.parent]?.push(id);
  });
  const subtree = (id: number): number[] => {
    const out: number[] = [];
    const stack = [id];
    while (stack.length > 0 && out.length < 400) {
      const next = stack.pop() as number;
      out.push(next);
      for (const child of children[next] ?? []) stack.push(child);
    }
    return out;
  };
  const areaCandidates = manifest.generalDirs.filter((id) => {
    const depth = manifest.dirs[id]?.depth ?? 0;
    return depth >= 2 && depth <= 4;
  });
  const visitedAreas: number[] = [];
  const touched: number[] = [];
  const touchedSet = new Set<number>();
  const steps: Step[] = [];
  let taskStepsLeft = 0;
  let areaDirs: number[] = [];
  let taskTouched: number[] = [];
  let variant = 0;
  for (let request = 0; request < requests; request++) {
    if (taskStepsLeft === 0) {
      const area =
        visitedAreas.length > 0 && random.chance(0.4) ? random.pick(visitedAreas) : random.pick(areaCandidates);
      visitedAreas.push(area);
      areaDirs = subtree(area);
      taskTouched = [];
      taskStepsLeft = random.int(8, 25);
    }
    taskStepsLeft--;
    const calls: Step["calls"] = [];
    const callCount = request === 0 ? 0 : random.int(0, 3);
    for (let c = 0; c < callCount; c++) {
      const dirId = taskTouched.length > 0 && random.chance(0.7) ? random.pick(taskTouched) : random.pick(areaDirs);
      if (!taskTouched.includes(dirId)) taskTouched.push(dirId);
      if (!touchedSet.has(dirId)) {
        touchedSet.add(dirId);
        touched.push(dirId);
      }
      calls.push(toolCallFor(manifest, dirId, variant++));
    }
    steps.push({ calls, compactBefore: request === Math.floor(requests / 2), touchedAfter: touched.slice() });
  }
  return steps;
}

function commonPrefixLength(a: string, b: string): number {
  const limit = Math.min(a.length, b.length);
  let i = 0;
  while (i < limit && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  return i;
}

export async function runScriptedSession(
  plugin: Plugin,
  manifest: TreeManifest,
  options: { requests: number; seed: number; fileNames: readonly string[]; maxDepth: number },
): Promise<SessionResult> {
  const steps = buildScript(manifest, options.requests, options.seed);
  const instance = await startPlugin(plugin, manifest.root);
  const session = instance.session("ses_script");
  const tokensByBlock = new Map<string, number>();
  const tokenSamples: number[] = [];
  let previous: string | undefined;
  let previousFileCount = 0;
  let identical = 0;
  let unavoidable = 0;
  let other = 0;
  let prefixKeptSum = 0;
  let toolCalls = 0;
  let compactionContextTokens = 0;
  for (const step of steps) {
    for (const call of step.calls) {
      await session.toolCall(call.tool, call.args);
      toolCalls++;
    }
    if (step.compactBefore) compactionContextTokens = countTokens((await session.compact()).join("\n\n"));
    const block = await session.transform();
    let tokens = tokensByBlock.get(block);
    if (tokens === undefined) {
      tokens = countTokens(block);
      tokensByBlock.set(block, tokens);
    }
    // Token counts, not times: summarizeNs divides by 1000, so feed it tokens × 1000.
    tokenSamples.push(tokens * 1000);
    const fileCount = effectiveContextFiles(manifest, chainDirIds(manifest, step.touchedAfter, options.maxDepth), options.fileNames).length;
    if (previous !== undefined) {
      if (block === previous) identical++;
      else {
        if (fileCount > previousFileCount) unavoidable++;
        else other++;
        prefixKeptSum += previous.length === 0 ? 0 : commonPrefixLength(previous, block) / previous.length;
      }
    }
    previous = block;
    previousFileCount = fileCount;
  }
  await instance.hooks.dispose();
  const changed = unavoidable + other;
  return {
    requests: steps.length,
    toolCalls,
    touchedDirs: steps[steps.length - 1]?.touchedAfter.length ?? 0,
    identicalToPrevious: identical,
    changed,
    unavoidableChanges: unavoidable,
    otherChanges: other,
    meanPrefixKept: changed === 0 ? 1 : prefixKeptSum / changed,
    tokensPerRequest: summarizeNs(tokenSamples),
    compactionContextTokens,
  };
}
