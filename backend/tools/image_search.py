"""The `image_search` tool: which indexed images look most like a local image file."""

from __future__ import annotations

from pathlib import Path

from backend.tools.base import BaseTool, Passage, ToolCapabilities
from backend.tools.image_index import ImageIndex

MATCHES = 3


class ImageSearchTool(BaseTool):
    name = "image_search"
    description = (
        "Find the titles of the 3 indexed images that look most like a local image file "
        "(use it when the question comes with an image), then search those titles."
    )
    capabilities = ToolCapabilities(needs_image=True, once_per_question=True, captions_images=True)
    parameters = {
        "type": "object",
        "properties": {"image": {"type": "string", "minLength": 1, "description": "path of the image file"}},
        "required": ["image"],
    }

    def __init__(self, index: ImageIndex, min_similarity: float = 0.0) -> None:
        self.index = index
        # Unless the nearest indexed image is this similar, the index says nothing about the image (a
        # printed notice's nearest is some flag at 0.8): no title and no passage reaches the model.
        self.min_similarity = min_similarity

    def run(self, arguments: dict) -> tuple[str, list[Passage]]:
        image = Path(arguments["image"].strip()).expanduser()
        matches = self.index.search(image, k=MATCHES)
        passages = [
            Passage(title=entry.title, text=f"indexed image {entry.path.name}", source="image-index", score=score)
            for entry, score in matches
        ]
        best = max((score for _, score in matches), default=0.0)
        # The uploaded file's name is never shown: "tricolour_romania.png" became the search "tricolour
        # romania" for a flag nothing indexed looked like, an answer read from the name alone.
        if best < self.min_similarity:
            return (f"No indexed image looks like the question's image: the most similar is {best:.2f} alike, below "
                    f"the {self.min_similarity:.2f} a match needs. Research the question from the image's text and "
                    "its own words."), []
        lines = ["Indexed images most similar to the question's image (similarity 0-1):"]
        lines += [f"[{n}] {passage.title} ({passage.score:.2f})" for n, passage in enumerate(passages, start=1)]
        return "\n".join(lines), passages
