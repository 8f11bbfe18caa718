import { z } from "zod";
import { toolError, toolSuccess, type ToolDefinition } from "../core/tools.js";
import type { WorkspaceFileSystem } from "../core/workspace-fs.js";
import { withFileErrors } from "./file-errors.js";

export const MAX_EDIT_BYTES = 10 * 1024 * 1024;

const input = z.strictObject({
  path: z.string().describe("File path relative to the workspace"),
  old_string: z.string().min(1).describe("Exact text to replace, including whitespace"),
  new_string: z.string().describe("Text to put in its place"),
  replace_all: z.boolean().optional().describe("Replace every occurrence instead of exactly one"),
});

/** `edit_file`: exact-text replacement; the text must occur once unless `replace_all` is set. */
export function editFileTool(fs: WorkspaceFileSystem): ToolDefinition<z.infer<typeof input>> {
  return {
    name: "edit_file",
    description:
      "Replace exact text in a workspace file. old_string must match exactly once, unless replace_all is true.",
    inputSchema: input,
    effect: "write",
    handler: ({ path, old_string, new_string, replace_all = false }) =>
      withFileErrors(async () => {
        const text = await fs.readWhole(path, MAX_EDIT_BYTES);
        const count = text.split(old_string).length - 1;
        if (count === 0) return toolError("edit_no_match", `old_string was not found in ${path}`);
        if (count > 1 && !replace_all) {
          return toolError(
            "edit_ambiguous",
            `old_string occurs ${count} times in ${path}; add context or set replace_all`,
          );
        }
        // split/join, not String.replace: `$&` and friends in new_string must stay literal.
        const updated = replace_all
          ? text.split(old_string).join(new_string)
          : spliceOnce(text, old_string, new_string);
        await fs.writeText(path, updated);
        return toolSuccess(
          `Replaced ${replace_all ? count : 1} occurrence${count > 1 && replace_all ? "s" : ""} in ${path}`,
        );
      }),
  };
}

function spliceOnce(text: string, search: string, replacement: string): string {
  const at = text.indexOf(search);
  return text.slice(0, at) + replacement + text.slice(at + search.length);
}
