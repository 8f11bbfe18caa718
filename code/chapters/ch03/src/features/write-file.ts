import { z } from "zod";
import { toolSuccess, type ToolDefinition } from "../core/tools.js";
import type { WorkspaceFileSystem } from "../core/workspace-fs.js";
import { withFileErrors } from "./file-errors.js";

const input = z.strictObject({
  path: z.string().describe("File path relative to the workspace"),
  content: z.string().describe("The whole new content of the file"),
});

/** `write_file`: creates or overwrites a file; missing parent folders are created inside the workspace. */
export function writeFileTool(fs: WorkspaceFileSystem): ToolDefinition<z.infer<typeof input>> {
  return {
    name: "write_file",
    description: "Create or overwrite a text file in the workspace with the given content.",
    inputSchema: input,
    effect: "write",
    handler: ({ path, content }) =>
      withFileErrors(async () => {
        const { created } = await fs.writeText(path, content);
        return toolSuccess(
          `${created ? "Created" : "Overwrote"} ${path} (${Buffer.byteLength(content, "utf8")} bytes)`,
        );
      }),
  };
}
