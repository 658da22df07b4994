/**
 * Runs the plugin in a process of its own, driven by a JSON script, for the hardening tests that
 * need a separate process: as a non-root user, under strace (fault injection, syscall tracing), or
 * to prove that a disposed plugin lets the process exit on its own.
 *
 * Usage: bun runner.ts <script.json>. Prints one JSON line (the `Report`) on stdout, then returns
 * without calling process.exit: whatever the plugin left running decides when the process ends.
 */
import { existsSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { inotifyWatches, start } from "../../helpers/harness.ts";

export type Op =
  /** Session and tool are whatever JSON the test gives: hostile values are part of the point. */
  | { op: "touch"; session: unknown; tool: unknown; args: unknown }
  | { op: "after"; session: unknown; tool: unknown; args: unknown; output?: string }
  | { op: "step"; session: string }
  /** Starts a step and goes on without waiting for it (OpenCode disposing mid-request). */
  | { op: "stepNoWait"; session: string }
  | { op: "compact"; session: string }
  | { op: "write"; path: string; text: string }
  | { op: "rm"; path: string }
  /** rename(2) of `from` to `to` (both relative to the root): atomic, as `mv` does. */
  | { op: "rename"; from: string; to: string }
  /** A symlink at `path` (relative to the root) to `target` (as given). */
  | { op: "symlink"; target: string; path: string }
  /** OpenCode's session.deleted event. */
  | { op: "delete"; session: string }
  /** A user message (chat.message): records the text part the plugin added ("" when none). */
  | { op: "message"; session: string }
  /**
   * Steps (`via` "step", the default: the system block) or sends user messages (`via` "message": what
   * stable delivery adds to one) until the text contains (or no longer contains) `text`; records how
   * many tries it took.
   */
  | { op: "stepUntil"; session: string; contains?: string; lacks?: string; timeoutMs: number; via?: "step" | "message" }
  /**
   * `sessions` sessions, one after another: each touches `dirs` directories (tool.execute.before and
   * after), steps, gets a user message, and is deleted (event session.deleted).
   */
  | { op: "churn"; sessions: number; dirs: readonly string[]; prefix: string }
  /** Records the inotify watches this process holds (read from /proc/self/fdinfo). */
  | { op: "inotify" }
  /** Waits until this process holds at least `min` inotify watches (the watcher has scanned). */
  /** Waits (bounded) until the process holds at least `min` and at most `max` inotify watches, then reports them. */
  | { op: "waitWatches"; min?: number; max?: number; timeoutMs: number }
  /** Creates `path` (absolute): tells the test this point was reached. */
  | { op: "signal"; path: string }
  /** Waits until `path` (absolute) exists: the test did its part. */
  | { op: "waitFile"; path: string; timeoutMs: number }
  /** Records resident memory and heap after a full garbage collection. */
  | { op: "memory" }
  | { op: "dispose" };

export interface Script {
  root: string;
  options?: Record<string, unknown>;
  ops: Op[];
}

export type Event =
  | { op: "step"; text: string; ms: number }
  | { op: "after"; text: string }
  | { op: "message"; text: string }
  | { op: "compact"; text: string; ms: number }
  | { op: "stepUntil"; ok: boolean; steps: number; ms: number; text: string }
  | { op: "inotify"; watches: number; instances: number }
  | { op: "memory"; rss: number; heapUsed: number }
  | { op: "error"; message: string };

export interface Report {
  uid: number;
  /** Wall-clock time (ms since the epoch) the report was written: the child's last act. */
  reportedAt: number;
  events: Event[];
  logs: { level: string; message: string }[];
}

function inotify(): { watches: number; instances: number } {
  const { instances, inodes } = inotifyWatches();
  return { watches: inodes.length, instances };
}

/**
 * OpenCode's server keeps its process alive while a hook awaits; this stands in for it until the
 * report, so that whatever keeps the process alive after the report is the plugin's doing.
 */
const keepAlive = setInterval(() => {}, 60_000);

async function main(): Promise<void> {
  const file = process.argv[2];
  if (file === undefined) throw new Error("usage: runner.ts <script.json>");
  const script = JSON.parse(readFileSync(file, "utf8")) as Script;

  const plugin = await start(script.root, script.options, { history: process.env.HARDENING_HANGING_HISTORY ? "never" : [] });
  const events: Event[] = [];
  let call = 0;
  let messages = 0;
  /** Runs chat.message for a new user message as OpenCode does; the text of the part the plugin added. */
  const message = async (session: string): Promise<string> => {
    const info = { id: `msg_${String(++messages).padStart(8, "0")}`, sessionID: session, role: "user" };
    const parts: { id: string; type: string; text?: string }[] = [{ id: `prt_${info.id}_1`, type: "text", text: "go on" }];
    await plugin.hooks["chat.message"]!({ sessionID: session, agent: "build" } as never, { message: info, parts } as never);
    return parts.slice(1).map((part) => part.text ?? "").join("\n");
  };
  for (const op of script.ops) {
    switch (op.op) {
      case "touch":
        await plugin.hooks["tool.execute.before"]!({ tool: op.tool, sessionID: op.session, callID: `call-${++call}` } as never, { args: op.args });
        break;
      case "after": {
        const output = { title: "", output: op.output ?? "", metadata: {} };
        await plugin.hooks["tool.execute.after"]!({ tool: op.tool, sessionID: op.session, callID: `call-${++call}`, args: op.args } as never, output);
        events.push({ op: "after", text: output.output });
        break;
      }
      case "message":
        events.push({ op: "message", text: await message(op.session) });
        break;
      case "churn":
        for (let i = 0; i < op.sessions; i++) {
          const session = `${op.prefix}${i}`;
          for (const dir of op.dirs) {
            const args = { filePath: `${dir}/f${i}.ts` };
            await plugin.hooks["tool.execute.before"]!({ tool: "read", sessionID: session, callID: `call-${++call}` } as never, { args });
            await plugin.hooks["tool.execute.after"]!({ tool: "read", sessionID: session, callID: `call-${++call}`, args } as never, { title: "", output: "x", metadata: {} });
          }
          await plugin.step(session);
          await message(session);
          await plugin.hooks.event!({ event: { type: "session.deleted", properties: { info: { id: session } } } } as never);
        }
        break;
      case "step": {
        const began = performance.now();
        const text = (await plugin.step(op.session)) ?? "";
        events.push({ op: "step", text, ms: Math.round(performance.now() - began) });
        break;
      }
      case "stepNoWait":
        void plugin.step(op.session);
        break;
      case "compact": {
        const began = performance.now();
        const text = (await plugin.compact(op.session)).join("\n");
        events.push({ op: "compact", text, ms: Math.round(performance.now() - began) });
        break;
      }
      case "write":
        writeFileSync(join(script.root, op.path), op.text);
        break;
      case "rm":
        rmSync(join(script.root, op.path), { force: true, recursive: true });
        break;
      case "rename":
        renameSync(join(script.root, op.from), join(script.root, op.to));
        break;
      case "symlink":
        symlinkSync(op.target, join(script.root, op.path));
        break;
      case "delete":
        await plugin.hooks.event!({ event: { type: "session.deleted", properties: { info: { id: op.session } } } } as never);
        break;
      case "stepUntil": {
        const began = performance.now();
        let steps = 0;
        let text = "";
        let ok = false;
        while (performance.now() - began < op.timeoutMs) {
          text = op.via === "message" ? await message(op.session) : ((await plugin.step(op.session)) ?? "");
          steps++;
          if ((op.contains === undefined || text.includes(op.contains)) && (op.lacks === undefined || !text.includes(op.lacks))) {
            ok = true;
            break;
          }
          await Bun.sleep(10);
        }
        events.push({ op: "stepUntil", ok, steps, ms: Math.round(performance.now() - began), text });
        break;
      }
      case "inotify":
        events.push({ op: "inotify", ...inotify() });
        break;
      case "waitWatches": {
        const deadline = performance.now() + op.timeoutMs;
        const within = (watches: number) => watches >= (op.min ?? 0) && watches <= (op.max ?? Infinity);
        while (!within(inotify().watches) && performance.now() < deadline) await Bun.sleep(2);
        events.push({ op: "inotify", ...inotify() });
        break;
      }
      case "signal":
        writeFileSync(op.path, "");
        break;
      case "waitFile": {
        const deadline = performance.now() + op.timeoutMs;
        while (!existsSync(op.path) && performance.now() < deadline) await Bun.sleep(5);
        if (!existsSync(op.path)) events.push({ op: "error", message: `timed out waiting for ${op.path}` });
        break;
      }
      case "memory": {
        Bun.gc(true);
        const { rss, heapUsed } = process.memoryUsage();
        events.push({ op: "memory", rss, heapUsed });
        break;
      }
      case "dispose":
        await plugin.dispose();
        break;
    }
  }
  const report: Report = {
    uid: process.getuid?.() ?? -1,
    reportedAt: 0,
    events,
    logs: plugin.logs.map(({ level, message }) => ({ level, message })),
  };
  clearInterval(keepAlive);
  report.reportedAt = performance.timeOrigin + performance.now();
  process.stdout.write(`${JSON.stringify(report)}\n`);
}

main().catch((error) => {
  clearInterval(keepAlive);
  process.stdout.write(`${JSON.stringify({ uid: -1, reportedAt: 0, events: [{ op: "error", message: String(error?.stack ?? error) }], logs: [] })}\n`);
  process.exitCode = 1;
});
