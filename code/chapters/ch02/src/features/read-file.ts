import { z } from "zod";
import { toolSuccess, type ToolDefinition } from "../core/tools.js";
import type { WorkspaceFileSystem } from "../core/workspace-fs.js";
import { withFileErrors } from "./file-errors.js";

export const DEFAULT_READ_LINES = 2_000;

const input = z.strictObject({
  path: z.string().describe("File path relative to the workspace"),
  offset: z.number().int().min(1).optional().describe("First line to read, 1-based (default 1)"),
  limit: z
    .number()
    .int()
    .min(1)
    .max(DEFAULT_READ_LINES)
    .optional()
    .describe(`Lines to read (default and most ${DEFAULT_READ_LINES})`),
});

/** `read_file`: one page of a text file; a large file is read a page at a time, never whole. */
export function readFileTool(fs: WorkspaceFileSystem): ToolDefinition<z.infer<typeof input>> {
  return {
    name: "read_file",
    description: "Read a text file in the workspace, a page of lines at a time.",
    inputSchema: input,
    effect: "read",
    handler: ({ path, offset = 1, limit = DEFAULT_READ_LINES }) =>
      withFileErrors(async () => {
        const page = await fs.readText(path, { offset, limit });
        if (page.lineCount === 0)
          return toolSuccess(offset === 1 ? "(empty file)" : `(no lines at or after line ${offset})`);
        const last = page.firstLine + page.lineCount - 1;
        const footer = page.more
          ? `\n[lines ${page.firstLine}-${last}; more follow: read_file with offset ${last + 1}]`
          : "";
        return toolSuccess(page.text + footer);
      }),
  };
}
