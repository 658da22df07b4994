/** OpenCode appends its reminder at the very end of a read's output; text before it is the file's own. */
const REMINDER = /\n*<system-reminder>\n?((?:(?!<system-reminder>)[\s\S])*?)<\/system-reminder>\s*$/;
const ENTRY_START = /^Instructions from: (.+)$/m;

/** Paths of the instruction files OpenCode appended to a read's output in its closing `<system-reminder>`. */
export function reminderPaths(output: string): string[] {
  const paths: string[] = [];
  const inner = REMINDER.exec(output)?.[1];
  if (inner !== undefined) for (const entry of entries(inner)) paths.push(entry.path);
  return paths;
}

/**
 * Removes from `output`'s closing reminder the entries for which `drop(path)` is true; a reminder
 * left with no entry goes whole. All other text, and reminders of any other kind, stay as they are.
 */
export function stripReminders(output: string, drop: (path: string) => boolean): string {
  return output.replace(REMINDER, (block, inner: string) => {
    const found = entries(inner);
    if (found.length === 0) return block;
    const kept = found.filter((entry) => !drop(entry.path));
    if (kept.length === found.length) return block;
    if (kept.length === 0) return "";
    const leading = block.slice(0, block.indexOf("<system-reminder>"));
    return `${leading}<system-reminder>\n${kept.map((entry) => entry.text).join("\n")}\n</system-reminder>`;
  });
}

/** A reminder's "Instructions from: <path>" entries, each with the text up to the next one. */
function entries(inner: string): { path: string; text: string }[] {
  if (!ENTRY_START.test(inner)) return [];
  const parts = inner.split(/^(?=Instructions from: )/m).filter((part) => part.trim() !== "");
  // Text before the first entry means this is not purely an instructions reminder: leave it alone.
  if (!parts[0]?.startsWith("Instructions from: ")) return [];
  const found: { path: string; text: string }[] = [];
  for (const text of parts) {
    const path = ENTRY_START.exec(text)?.[1]?.trim();
    // An entry with no path is not one OpenCode wrote: leave the whole reminder alone.
    if (path === undefined || path === "") return [];
    found.push({ path, text: text.replace(/\n+$/, "") });
  }
  return found;
}
