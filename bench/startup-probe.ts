/**
 * Child process: the plugin's start-up as OpenCode sees it, in a fresh process: import of the
 * module (with everything it pulls in), then ProjectContext(input, options) until the hooks
 * resolve, then the first transform of a session with nothing touched yet.
 * Usage: bun bench/startup-probe.ts '{"pluginPath":…,"root":…}'  → one JSON line on stdout.
 */
import { loadPlugin, makePluginInput, requireHooks, headerParts, buildHeader, BENCH_MODEL } from "./host.ts";

interface ProbeArgs {
  pluginPath: string;
  root: string;
}

export interface StartupSample {
  importMs: number;
  initMs: number;
  firstTransformMs: number;
}

if (import.meta.main) {
  const args = JSON.parse(process.argv[2] ?? "{}") as ProbeArgs;
  const header = headerParts(args.root);
  const started = performance.now();
  const plugin = await loadPlugin(args.pluginPath);
  const imported = performance.now();
  const hooks = requireHooks(await plugin(makePluginInput(args.root), {}));
  const ready = performance.now();
  const output = { system: [buildHeader(header)] };
  await hooks.systemTransform({ sessionID: "ses_startup", model: BENCH_MODEL }, output);
  const transformed = performance.now();
  await hooks.dispose();
  const sample: StartupSample = {
    importMs: imported - started,
    initMs: ready - imported,
    firstTransformMs: transformed - ready,
  };
  console.log(JSON.stringify(sample));
  process.exit(0);
}
