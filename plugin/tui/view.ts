/**
 * What the TUI shows of a session, computed from its latest request record and its steering
 * requests: pure functions of the data (no host, no I/O), so every line the sidebar and the
 * `/context` dialog draw is decided here and tested without a terminal.
 *
 * Records come from a file anyone could have written, so nothing in them is trusted: a file entry
 * that is not the shape of a FileRecord is left out, and every path is made safe to print.
 */
import { sanitize } from "../block/escape.ts";
import type { FileRecord, FileState, RequestRecord, SteerRequest } from "../records/format.ts";

/** Cells of a sidebar line: OpenCode's own sidebar sections fit their rows in 36. */
export const SIDEBAR_WIDTH = 36;
/** File rows the sidebar lists at most; the dialog lists them all. */
export const SIDEBAR_ROWS = 12;
/** Longest path (in UTF-16 units) worth printing: longer ones are shortened before anything else. */
const MAX_PATH_UNITS = 1024;

export type SteerAction = SteerRequest["action"];
/** A file's state in the record, or `other`: a pin or a pending request naming no file of the record. */
export type RowState = FileState | "other";

export interface ContextRow {
  /** As recorded (worktree-relative): what a steering request names. */
  readonly path: string;
  /** `path` made safe to print. */
  readonly label: string;
  readonly state: RowState;
  readonly mode: string;
  readonly tokens: number;
  readonly total: number;
  readonly pinned: boolean;
  /** A steering request newer than the record: the next record will show it applied. */
  readonly pending?: SteerAction;
}

export interface ContextView {
  readonly rows: readonly ContextRow[];
  /** Pins that name no listed file (a directory, or a file not in context), so they can be unpinned. */
  readonly otherPins: readonly ContextRow[];
  /** Tokens the plugin's copies take in the request. */
  readonly tokens: number;
  readonly cut: number;
  readonly omitted: number;
}

const STATES: ReadonlySet<string> = new Set<FileState>(["system", "cut", "conversation", "host", "omitted", "unloaded"]);

/** One mark per state: blank for a file the request carries whole. */
const MARKS: Readonly<Record<RowState, string>> = {
  other: " ",
  system: " ",
  conversation: " ",
  host: "·",
  cut: "✂",
  omitted: "…",
  unloaded: "−",
};

const STATE_WORDS: Readonly<Record<RowState, string>> = {
  other: "not in this request",
  system: "system block",
  conversation: "conversation",
  host: "OpenCode's own",
  cut: "cut",
  omitted: "omitted",
  unloaded: "unloaded",
};

const PIN_MARK = "◆";
const PENDING_MARK = "◇";

const isCount = (value: unknown): value is number => typeof value === "number" && Number.isFinite(value) && value >= 0;

function isFileRecord(value: unknown): value is FileRecord {
  if (typeof value !== "object" || value === null) return false;
  const file = value as Partial<Record<keyof FileRecord, unknown>>;
  return typeof file.path === "string" && file.path !== "" && typeof file.state === "string" && STATES.has(file.state) && isCount(file.tokens) && isCount(file.total);
}

/**
 * `text` as one printable line: invisible and bidi characters removed (they could make a path read
 * as another), control characters (escape sequences, line breaks) shown as U+FFFD, and a hostile
 * length cut early so that nothing after costs more than a path should.
 */
export function printable(text: string): string {
  const bounded = text.length > MAX_PATH_UNITS ? `${text.slice(0, MAX_PATH_UNITS)}…` : text;
  return sanitize(bounded).replace(/\p{Cc}/gu, "\uFFFD");
}

/** 812, 1.2k, 12k, 1.2M: at most five cells; "?" for what is not a count. */
export function formatTokens(count: number): string {
  if (!isCount(count)) return "?";
  if (count < 1000) return String(Math.floor(count));
  if (count < 10_000) return `${Math.floor(count / 100) / 10}k`;
  if (count < 1_000_000) return `${Math.floor(count / 1000)}k`;
  return `${Math.floor(count / 100_000) / 10}M`;
}

/** Terminal cells of `text` (wide characters take two). */
const cells = (text: string) => Bun.stringWidth(text);

/** `text` in at most `width` cells, its start replaced by `…` when it does not fit: a path's end names it. */
export function fitStart(text: string, width: number): string {
  if (cells(text) <= width) return text;
  if (width <= 0) return "";
  const points = [...text];
  let kept = "";
  let used = 1; // the ellipsis
  for (let at = points.length - 1; at >= 0; at--) {
    const point = points[at]!;
    const size = cells(point);
    if (used + size > width) break;
    kept = point + kept;
    used += size;
  }
  return `…${kept}`;
}

/** The last steering request for each path made after the record (all of them when there is no record). */
function pendingByPath(record: RequestRecord | undefined, steers: readonly SteerRequest[]): Map<string, SteerAction> {
  const since = record === undefined ? Number.NEGATIVE_INFINITY : Date.parse(record.time);
  const pending = new Map<string, SteerAction>();
  // An unreadable record time makes every request pending: better a mark too many than a silent pin.
  for (const steer of steers) if (!(Date.parse(steer.time) <= since)) pending.set(steer.path, steer.action);
  return pending;
}

function toRow(path: string, fields: Omit<ContextRow, "path" | "label" | "pinned" | "pending">, pins: ReadonlySet<string>, pending: ReadonlyMap<string, SteerAction>): ContextRow {
  const action = pending.get(path);
  return { path, label: printable(path), ...fields, pinned: pins.has(path), ...(action === undefined ? {} : { pending: action }) };
}

/** The session as its latest record shows it, with the steering requests the plugin has not applied yet. */
export function contextView(record: RequestRecord | undefined, steers: readonly SteerRequest[]): ContextView | undefined {
  const pending = pendingByPath(record, steers);
  if (record === undefined && pending.size === 0) return undefined;
  const pins = new Set(Array.isArray(record?.pins) ? record.pins.filter((pin): pin is string => typeof pin === "string") : []);
  const files = Array.isArray(record?.files) ? record.files.filter(isFileRecord) : [];
  const rows = files.map((file) => toRow(file.path, { state: file.state, mode: typeof file.mode === "string" ? file.mode : "", tokens: file.tokens, total: file.total }, pins, pending));
  const listed = new Set(rows.map((row) => row.path));
  const others = [...new Set([...pins, ...pending.keys()])].filter((path) => !listed.has(path));
  const otherPins = others.map((path) => toRow(path, { state: "other", mode: "", tokens: 0, total: 0 }, pins, pending));
  return {
    rows,
    otherPins,
    tokens: rows.reduce((sum, row) => sum + row.tokens, 0),
    cut: rows.filter((row) => row.state === "cut").length,
    omitted: rows.filter((row) => row.state === "omitted").length,
  };
}

/** Whether the file is pinned once what is pending is applied. */
const pinnedAfter = (row: ContextRow) => (row.pending === undefined ? row.pinned : row.pending === "load");

/** What selecting the row in the dialog asks for: unpin what is (or will be) pinned, else pin. */
export const toggleAction = (row: ContextRow): SteerAction => (pinnedAfter(row) ? "unload" : "load");

/** The tokens a row shows: what the request carries, or the whole file's when it carries none of it. */
function rowTokens(row: ContextRow): string {
  if (row.state === "cut") return `${formatTokens(row.tokens)}/${formatTokens(row.total)}`;
  if (row.tokens === 0) return formatTokens(row.total);
  return formatTokens(row.tokens);
}

/** One cell, so that paths line up whether pinned or not. */
const pinMark = (row: ContextRow) => (row.pending !== undefined ? PENDING_MARK : row.pinned ? PIN_MARK : " ");

export type Tone = "title" | "normal" | "muted" | "warning";

export interface SidebarLine {
  readonly text: string;
  /** Right-aligned (a row's tokens). */
  readonly right?: string;
  readonly tone: Tone;
}

/** The sidebar section: a title, the totals, then the files in the record's order (capped), each in one line. */
export function sidebarLines(view: ContextView | undefined, maxRows = SIDEBAR_ROWS, width = SIDEBAR_WIDTH): SidebarLine[] {
  const title: SidebarLine = { text: "Project context", tone: "title" };
  if (view === undefined) return [title, { text: "no request recorded yet", tone: "muted" }];
  const marks = [view.cut > 0 ? `✂ ${view.cut} cut` : "", view.omitted > 0 ? `… ${view.omitted} omitted` : ""].filter((mark) => mark !== "");
  const summary = `${view.rows.length} ${view.rows.length === 1 ? "file" : "files"} · ${formatTokens(view.tokens)} tokens`;
  const lines: SidebarLine[] = [title, { text: summary, tone: "muted" }];
  if (marks.length > 0) lines.push({ text: marks.join(" · "), tone: "warning" });
  for (const row of [...view.rows, ...view.otherPins].slice(0, Math.max(0, maxRows))) {
    const right = row.state === "other" ? "" : rowTokens(row);
    const lead = `${MARKS[row.state]}${pinMark(row)} `;
    const room = width - cells(lead) - (right === "" ? 0 : cells(right) + 1);
    const tone: Tone = row.state === "cut" || row.state === "omitted" ? "warning" : row.state === "unloaded" || row.state === "other" ? "muted" : "normal";
    lines.push({ text: lead + fitStart(row.label, room), ...(right === "" ? {} : { right }), tone });
  }
  const hidden = view.rows.length + view.otherPins.length - Math.max(0, maxRows);
  if (hidden > 0) lines.push({ text: `+${hidden} more · /context`, tone: "muted" });
  return lines;
}

export interface DialogEntry {
  readonly path: string;
  readonly title: string;
  readonly description: string;
  readonly footer: string;
  readonly action: SteerAction;
}

function stateText(row: ContextRow): string {
  return row.state === "other" ? STATE_WORDS.other : `${STATE_WORDS[row.state]} · ${rowTokens(row)} tokens`;
}

function pinText(row: ContextRow): string {
  if (row.pending === "load") return "pin pending";
  if (row.pending === "unload") return "unpin pending";
  return row.pinned ? "pinned" : "";
}

/** The `/context` dialog's options: every file, then the other pins; selecting one toggles its pin. */
export function dialogEntries(view: ContextView | undefined): DialogEntry[] {
  if (view === undefined) return [];
  return [...view.rows, ...view.otherPins].map((row) => ({
    path: row.path,
    title: row.label,
    description: [stateText(row), printable(row.mode)].filter((part) => part !== "").join(" · "),
    footer: pinText(row),
    action: toggleAction(row),
  }));
}
