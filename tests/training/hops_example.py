"""One bridge question with its plan of sub-questions, shared by the hop tests (the trainer's, verl's, the
one episode loop's and the research page's)."""

FESTIVAL = "Where was the music festival Billy McFarland was charged with wire fraud for supposed to take place?"
DECOMPOSITION = ("1. Which music festival was Billy McFarland charged with wire fraud for?\n"
                 "2. Where was #1 supposed to take place?")
HOPS = ["Which music festival was Billy McFarland charged with wire fraud for?", "Where was #1 supposed to take place?"]
WORKED = ("Question: Who founded the company that made the first Walkman?\n1. Which company made the first Walkman?\n"
          "2. Who founded #1?\n(worked for an earlier question: the answer was right)")
