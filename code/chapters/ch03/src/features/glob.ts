import { z } from "zod";
import { toolSuccess, type ToolDefinition } from "../core/tools.js";
import { MAX_GLOB_PATTERN_CHARS, type WorkspaceFileSystem } from "../core/workspace-fs.js";
import { withFileErrors } from "./file-errors.js";

export const MAX_GLOB_RESULTS = 1_000;

const input = z.strictObject({
  pattern: z
    .string()
    .min(1)
    .max(MAX_GLOB_PATTERN_CHARS)
    .describe("Glob relative to the workspace: *, **, ?, [...], e.g. src/**/*.ts"),
});

/** `glob`: workspace-relative files matching a pattern; never through a symlinked folder, never outside. */
export function globTool(fs: WorkspaceFileSystem): ToolDefinition<z.infer<typeof input>> {
  return {
    name: "glob",
    description: "Find files in the workspace by glob pattern. Returns workspace-relative paths, sorted.",
    inputSchema: input,
    effect: "read",
    handler: ({ pattern }) =>
      withFileErrors(async () => {
        const { paths, capped } = await fs.glob(pattern, MAX_GLOB_RESULTS);
        if (paths.length === 0) return toolSuccess("(no matches)");
        const note = capped ? `\n[first ${MAX_GLOB_RESULTS} matches shown; more exist: narrow the pattern]` : "";
        return toolSuccess(paths.join("\n") + note);
      }),
  };
}
