import type { MemoryNotice } from "../features/memory.js";
import { shownText, wrapped } from "./approval-view.js";
import { oneLine, wrapsIntoCliLine } from "./visible.js";

/** Columns of a saved memory's description on its `[Memory] saved` line: the rest of it is in the file. */
export const MEMORY_DESCRIPTION_COLUMNS = 80;
/**
 * Columns of a failure's reason on its line. Ours are short; one that carries a provider's words (or a fake's) is cut,
 * so no reason can fill the terminal.
 */
export const MEMORY_REASON_COLUMNS = 200;

/** What every memory line begins with. */
const LEAD = "[Memory] ";

/** The notices a `[Memory]` line reports: every one but a side query starting, which only a status shows. */
export type MemoryLineNotice = Exclude<MemoryNotice, { readonly type: "querying" }>;

/** Names as a line lists them: each escaped (a name is a slug once checked, but the line does not rely on it). */
const names = (list: readonly string[]): string => list.map(oneLine).join(", ");

/** A reason as a line shows it: escaped and bounded. */
const reason = (text: string): string => shownText(text, MEMORY_REASON_COLUMNS);

/** `selected 2 of 9: a, b`, or `… 0 of 9` with no names. */
const selection = (chosen: readonly string[], total: number): string =>
  `selected ${chosen.length} of ${total}${chosen.length === 0 ? "" : `: ${names(chosen)}`}`;

/**
 * The line the CLI prints for one of memory's notices (chapter 9, ours: the book prints none). Text from the model or
 * the disk (names, descriptions, reasons) is escaped here, and descriptions and reasons are bounded.
 */
export function memoryLine(notice: MemoryLineNotice): string {
  return `${LEAD}${memoryText(notice)}`;
}

/**
 * `memoryLine` as the rows to print: the line itself, or, when an 80-column terminal could wrap it right before
 * something that reads like one of the CLI's own lines (a description or a reason may hold `[Permission] …`), rows of
 * our own whose later ones begin `    | `, as a failure line is cut.
 */
export function memoryRows(notice: MemoryLineNotice): readonly string[] {
  const text = memoryText(notice);
  return wrapsIntoCliLine(text, LEAD) ? wrapped(`${LEAD}${text}`, 0) : [`${LEAD}${text}`];
}

function memoryText(notice: MemoryLineNotice): string {
  switch (notice.type) {
    case "selected":
      return selection(notice.names, notice.total);
    case "selection_failed":
      return `selection failed: ${reason(notice.reason)}; keyword fallback ${selection(notice.names, notice.total)}`;
    case "extracted":
      return notice.names.length === 0
        ? "nothing new to save"
        : `extracted ${notice.names.length}: ${names(notice.names)}`;
    case "extraction_skipped":
      return `extraction skipped: the conversation is ${notice.bytes} bytes, over the ${notice.limit}-byte limit`;
    case "extraction_failed":
      return `extraction failed: ${reason(notice.reason)}`;
    case "consolidated":
      return `consolidated ${names(notice.sources)} into ${names(notice.records)}`;
    case "consolidation_failed":
      return `consolidation failed: ${reason(notice.reason)}; nothing of this run was saved`;
    case "saved":
      return `saved ${oneLine(notice.file)} (${oneLine(notice.kind)}): ${shownText(notice.description, MEMORY_DESCRIPTION_COLUMNS)}`;
    case "removed":
      return `removed ${oneLine(notice.file)}`;
    case "remove_failed":
      return `could not remove ${oneLine(notice.file)}`;
    case "waiting_for_lock":
      return "waiting for .memory/.lock (another process holds it)";
    case "unreadable":
      return `could not read the store: ${reason(notice.reason)}; nothing was selected`;
  }
}
