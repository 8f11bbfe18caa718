import type { MemoryNotice } from "../features/memory.js";
import { shownText } from "./approval-view.js";
import { oneLine } from "./visible.js";

/** Columns of a saved memory's description on its `[Memory] saved` line: the rest of it is in the file. */
export const MEMORY_DESCRIPTION_COLUMNS = 80;

/** Names as a line lists them: each escaped (a name is a slug once checked, but the line does not rely on it). */
const names = (list: readonly string[]): string => list.map(oneLine).join(", ");

/** `[Memory] selected 2 of 9: a, b`, or `… 0 of 9` with no names. */
const selection = (chosen: readonly string[], total: number): string =>
  `selected ${chosen.length} of ${total}${chosen.length === 0 ? "" : `: ${names(chosen)}`}`;

/**
 * The line the CLI prints for one of memory's notices (chapter 9, ours: the book prints none), or `undefined` for a
 * side query starting, which no line reports (a status says so while it runs). Text from the model or the disk (names,
 * descriptions, reasons) is escaped here; the caller prints the line through `visible`.
 */
export function memoryLine(notice: MemoryNotice): string | undefined {
  switch (notice.type) {
    case "selected":
      return `[Memory] ${selection(notice.names, notice.total)}`;
    case "selection_failed":
      return `[Memory] selection failed: ${oneLine(notice.reason)}; keyword fallback ${selection(notice.names, notice.total)}`;
    case "extracted":
      return notice.names.length === 0
        ? "[Memory] nothing new to save"
        : `[Memory] extracted ${notice.names.length}: ${names(notice.names)}`;
    case "extraction_skipped":
      return `[Memory] extraction skipped: the conversation is ${notice.bytes} bytes, over the ${notice.limit}-byte limit`;
    case "extraction_failed":
      return `[Memory] extraction failed: ${oneLine(notice.reason)}`;
    case "consolidated":
      return `[Memory] consolidated ${names(notice.sources)} into ${names(notice.records)}`;
    case "consolidation_failed":
      return `[Memory] consolidation failed: ${oneLine(notice.reason)}; nothing of this run was saved`;
    case "saved":
      return `[Memory] saved ${oneLine(notice.file)} (${oneLine(notice.kind)}): ${shownText(notice.description, MEMORY_DESCRIPTION_COLUMNS)}`;
    case "removed":
      return `[Memory] removed ${oneLine(notice.file)}`;
    case "remove_failed":
      return `[Memory] could not remove ${oneLine(notice.file)}`;
    case "waiting_for_lock":
      return "[Memory] waiting for .memory/.lock (another process holds it)";
    case "unreadable":
      return `[Memory] could not read the store: ${oneLine(notice.reason)}; nothing was selected`;
    case "querying":
      return undefined;
  }
}
