/**
 * The TUI module (`opencode-project-context/tui`, listed in tui.json): a sidebar section showing what
 * the session's latest request held of its context files, and a `/context` dialog to pin or unpin
 * them.
 *
 * OpenCode runs TUI plugins on its main thread and the server plugin in a worker, so they share no
 * memory: the per-request records the server plugin appends are what this module reads, and a pin
 * is a steering request it appends for the plugin to apply at the session's next step. Plain
 * TypeScript without JSX syntax: the same file runs from a checkout and, compiled by tsc, from the
 * package, on the renderer OpenCode provides.
 */
import type { TuiHostSlotMap, TuiPlugin, TuiPluginApi, TuiPluginModule, TuiSlotContext } from "@opencode-ai/plugin/tui";
import { jsx } from "@opentui/solid/jsx-runtime";
import { createSignal, type Accessor, type Setter } from "solid-js";
import { appendSteer, defaultRecordsDir, recordsDirOf } from "../records/format.ts";
import { latestRecord, recentSteers } from "./read.ts";
import { contextView, dialogEntries, sidebarLines, type ContextView, type SidebarLine, type Tone } from "./view.ts";
import { watchRecords } from "./watch.ts";

/** Sessions whose views are kept; the one shown least recently is dropped (and read again when shown). */
const MAX_SESSIONS = 32;
/** Right after OpenCode's own "Context" section (100), before MCP (200), LSP (300) and files (500). */
const SIDEBAR_ORDER = 150;

/** The server plugin's option, read the same way ("" is the default), from this module's entry in tui.json. */
function recordsDir(options: unknown): { dir: string; problem?: string } {
  const value = typeof options === "object" && options !== null ? (options as Record<string, unknown>)["recordsDir"] : undefined;
  if (value === undefined) return recordsDirOf("");
  if (typeof value === "string" && !value.includes("\0")) return recordsDirOf(value);
  return { dir: defaultRecordsDir(), problem: `recordsDir must be a path; using ${defaultRecordsDir()}` };
}

/** A signal per session shown, holding its view as its files last read. */
function sessionViews(dir: string) {
  const views = new Map<string, [Accessor<ContextView | undefined>, Setter<ContextView | undefined>]>();
  // Every read guards itself; should one throw anyway, the sidebar keeps what it shows and the TUI's loop never sees it.
  const read = (session: string, last: ContextView | undefined) => {
    try {
      return contextView(latestRecord(dir, session), recentSteers(dir, session));
    } catch {
      return last;
    }
  };
  return {
    /** The session's view; read inside a reactive scope, that scope renders again when it changes. */
    view(session: string): ContextView | undefined {
      let entry = views.get(session);
      views.delete(session);
      entry ??= createSignal(read(session, undefined));
      views.set(session, entry);
      for (const oldest of views.keys()) {
        if (views.size <= MAX_SESSIONS) break;
        views.delete(oldest);
      }
      return entry[0]();
    },
    refresh(session: string) {
      const entry = views.get(session);
      entry?.[1](read(session, entry[0]()));
    },
  };
}

function toneColors(api: TuiPluginApi): Record<Tone, unknown> {
  const theme = api.theme.current;
  return { title: theme.text, normal: theme.text, muted: theme.textMuted, warning: theme.warning };
}

function sidebarSection(api: TuiPluginApi, lines: readonly SidebarLine[]): unknown[] {
  const colors = toneColors(api);
  return lines.map((line) => {
    const text = jsx("text", { fg: colors[line.tone], wrapMode: "none", children: line.tone === "title" ? jsx("b", { children: line.text }) : line.text });
    if (line.right === undefined) return text;
    const right = jsx("text", { fg: colors.muted, wrapMode: "none", flexShrink: 0, children: line.right });
    return jsx("box", { flexDirection: "row", justifyContent: "space-between", gap: 1, children: [text, right] });
  });
}

/** The session the TUI shows, if it shows one. */
function currentSession(api: TuiPluginApi): string | undefined {
  const route = api.route.current as { name: string; params?: Record<string, unknown> };
  const session = route.name === "session" ? route.params?.["sessionID"] : undefined;
  return typeof session === "string" ? session : undefined;
}

const errorText = (error: unknown) => (error instanceof Error ? error.message : String(error));

const tui: TuiPlugin = async (api, options) => {
  const { dir, problem } = recordsDir(options);
  if (problem !== undefined) api.ui.toast({ variant: "warning", title: "Project context", message: problem });
  const sessions = sessionViews(dir);
  const watch = watchRecords(dir, sessions.refresh);
  api.lifecycle.onDispose(() => watch.close());
  // Without a watch, the end of each turn is the next best moment to read again.
  if (!watch.watching) api.event.on("session.status", (event) => sessions.refresh(event.properties.sessionID));

  api.slots.register({
    order: SIDEBAR_ORDER,
    slots: {
      sidebar_content(_context: TuiSlotContext, props: TuiHostSlotMap["sidebar_content"]) {
        return jsx("box", { flexDirection: "column", children: () => sidebarSection(api, sidebarLines(sessions.view(props.session_id))) });
      },
    },
  });

  const steer = (session: string, path: string) => {
    const entry = dialogEntries(sessions.view(session)).find((candidate) => candidate.path === path);
    if (entry === undefined) return;
    try {
      appendSteer(dir, session, entry.action, entry.path);
    } catch (error) {
      api.ui.toast({ variant: "error", title: "Project context", message: `The request was not written: ${errorText(error)}` });
      return;
    }
    sessions.refresh(session);
    const verb = entry.action === "load" ? "Pin" : "Unpin";
    api.ui.toast({ variant: "info", title: "Project context", message: `${verb} ${entry.title}: applies at the session's next step` });
  };

  const openDialog = () => {
    const session = currentSession(api);
    if (session === undefined || sessions.view(session) === undefined) {
      api.ui.toast({ variant: "info", title: "Project context", message: "No request of this session is recorded yet." });
      return;
    }
    api.ui.dialog.replace(() =>
      jsx(api.ui.DialogSelect<string>, {
        title: "Project context · select to pin or unpin",
        placeholder: "Filter files",
        // A getter, so the list follows new records and pending marks while the dialog is open.
        get options() {
          return dialogEntries(sessions.view(session)).map((entry) => ({ title: entry.title, value: entry.path, description: entry.description, footer: entry.footer }));
        },
        onSelect: (option: { value: string }) => steer(session, option.value),
      }),
    );
    // Paths and their states side by side: the medium size cuts most of a monorepo's paths.
    api.ui.dialog.setSize("large");
  };

  api.keymap.registerLayer({
    commands: [
      {
        name: "project-context.open",
        title: "Project context",
        desc: "Context files of this session; pin or unpin them",
        category: "Session",
        namespace: "palette",
        slashName: "context",
        run: openDialog,
      },
    ],
  });
};

const plugin: TuiPluginModule & { id: string } = { id: "opencode-project-context", tui };
export default plugin;
