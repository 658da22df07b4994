// The real `opencode` TUI in a real terminal: tmux on a socket of its own under the project's temp
// root, a fixed size, the project's isolated HOME and XDG dirs. A test types with `tmux send-keys`
// and reads the screen with `tmux capture-pane`.

import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { isolatedEnv } from "./harness.ts";

const REPO_ROOT = resolve(import.meta.dir, "../..");
const OPENCODE_BIN = join(REPO_ROOT, "node_modules/.bin/opencode");
const TMUX = "/usr/bin/tmux";
export const WIDTH = 160;
export const HEIGHT = 50;
/** A wait for the screen gives up after this long, showing what the screen held. */
export const SCREEN_TIMEOUT_MS = 60_000;
const POLL_MS = 100;

export type Terminal = {
  /** The screen as text, one line per row. */
  screen(): string;
  /** Types `text` literally (no key names). */
  type(text: string): void;
  /** Presses keys by tmux name: "Enter", "Escape", "C-c". */
  press(...keys: string[]): void;
  /** Polls the screen until `found` holds; fails after `ms` with the screen and `what`. */
  waitFor(found: (screen: string) => boolean, what: string, ms?: number): Promise<string>;
  close(): void;
};

/** The environment the harness gives `opencode run`, plus a terminal type (tmux's socket directory is under the same root). */
function terminalEnv(projectDir: string): Record<string, string> {
  const root = dirname(projectDir);
  return { ...isolatedEnv(join(root, "home"), projectDir, join(root, "tmp")), TERM: "xterm-256color", LANG: "C.UTF-8" };
}

/** Starts `opencode <args>` in the project directory, in a detached tmux session of WIDTH x HEIGHT. */
export function openTerminal(projectDir: string, args: string[] = []): Terminal {
  const root = dirname(projectDir);
  const socket = join(root, "tmux.sock");
  const config = join(root, "tmux.conf");
  // The pane stays when OpenCode exits, so a failure still shows its last screen.
  writeFileSync(config, "set -g remain-on-exit on\nset -g status off\n");
  const env = terminalEnv(projectDir);
  const tmux = (...tmuxArgs: string[]) => {
    const result = spawnSync(TMUX, ["-S", socket, ...tmuxArgs], { env, encoding: "utf8" });
    if (result.status !== 0) throw new Error(`tmux ${tmuxArgs[0]} failed (${result.status}): ${result.stderr}`);
    return result.stdout;
  };
  tmux("-f", config, "new-session", "-d", "-s", "oc", "-x", String(WIDTH), "-y", String(HEIGHT), "-c", projectDir, OPENCODE_BIN, ...args);
  const panePid = Number(tmux("display-message", "-p", "-t", "oc", "#{pane_pid}").trim());

  const screen = () => tmux("capture-pane", "-p", "-t", "oc");
  return {
    screen,
    type: (text) => void tmux("send-keys", "-t", "oc", "-l", text),
    press: (...keys) => void tmux("send-keys", "-t", "oc", ...keys),
    async waitFor(found, what, ms = SCREEN_TIMEOUT_MS) {
      const deadline = Date.now() + ms;
      for (;;) {
        const shown = screen();
        if (found(shown)) return shown;
        if (Date.now() > deadline) throw new Error(`not on screen within ${ms} ms: ${what}\n--- screen\n${shown}`);
        await new Promise((resolvePoll) => setTimeout(resolvePoll, POLL_MS));
      }
    },
    close() {
      spawnSync(TMUX, ["-S", socket, "kill-server"], { env });
      // OpenCode gets SIGHUP with its pane; whatever of its process group is left is ended here.
      try {
        if (panePid > 0) process.kill(-panePid, "SIGKILL");
      } catch {
        // already gone
      }
    },
  };
}
