import type { PluginInput } from "@opencode-ai/plugin";
import { terminalSafe } from "./terminal.ts";

export type Level = "debug" | "info" | "warn" | "error";

export interface Logger {
  log(level: Level, message: string, extra?: Record<string, unknown>): void;
  /** Logs a message the first time `key` is seen, so a repeated fault (a bad file read every step) speaks once. */
  once(key: string, level: Level, message: string, extra?: Record<string, unknown>): void;
}

const SERVICE = "project-context";
/**
 * Distinct "once" keys remembered at most: a key names a file version or a fault, so a long session
 * would otherwise grow the set forever. Past it the oldest are forgotten (and may speak again).
 */
const MAX_ONCE_KEYS = 4096;

/**
 * Logs through OpenCode's app.log endpoint. Best effort by design: `console` would garble the TUI,
 * and a logging failure must never become a hook failure, so every error is swallowed here.
 * OpenCode writes a message as is, one `LEVEL time service=... message` line to its log file (to
 * stderr with --print-logs), and messages name repository paths and text: each is written on one
 * line, escaped (terminalSafe), so that a name can neither start a forged line nor drive a terminal.
 */
export function createLogger(client: Pick<PluginInput["client"], "app"> | undefined): Logger {
  const seen = new Set<string>();
  const log = (level: Level, message: string, extra?: Record<string, unknown>): void => {
    try {
      const pending = client?.app?.log?.({ body: { service: SERVICE, level, message: terminalSafe(message), extra } });
      if (pending && typeof pending.catch === "function") pending.catch(() => {});
    } catch {
      // logging is best effort
    }
  };
  return {
    log,
    once(key, level, message, extra) {
      if (seen.has(key)) return;
      if (seen.size >= MAX_ONCE_KEYS) seen.delete(seen.values().next().value!);
      seen.add(key);
      log(level, message, extra);
    },
  };
}
