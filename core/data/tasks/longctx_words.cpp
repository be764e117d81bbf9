// The built-in word lists and haystack sentences of the long-context tasks. Everything
// here is plain, original and neutral: common English words and names, and sentences
// written for this project. The lists only ever grow at the end (sample k's keys are
// indices into them).
#include <algorithm>

#include "core/data/tasks/longctx_build.hpp"

namespace lcr::tasks::longctx {

const std::string kNoiseFiller =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. ";

const std::vector<std::string>& key_adjectives() {
  static const std::vector<std::string> w = {
      "quiet",  "brave", "calm",   "eager",  "gentle",  "happy",  "jolly",  "kind",
      "lively", "proud", "silly",  "witty",  "ancient", "bright", "crisp",  "dusty",
      "fancy",  "fuzzy", "golden", "hollow", "icy",     "jagged", "lucky",  "misty",
      "narrow", "odd",   "plain",  "quick",  "rapid",   "rusty",  "sandy",  "shiny",
      "smooth", "spicy", "steady", "sturdy", "tidy",    "tiny",   "velvet", "warm",
      "wild",   "windy", "wooden", "young",  "zesty",   "amber",  "bold",   "cozy"};
  return w;
}

const std::vector<std::string>& key_nouns() {
  static const std::vector<std::string> w = {
      "apple",   "badger", "bridge", "candle", "canyon",  "castle", "cedar",   "comet",
      "copper",  "desert", "dragon", "falcon", "forest",  "garden", "glacier", "harbor",
      "island",  "jacket", "kettle", "ladder", "lantern", "meadow", "mirror",  "mountain",
      "orchard", "otter",  "pebble", "pepper", "pillow",  "planet", "pocket",  "puzzle",
      "rabbit",  "river",  "rocket", "saddle", "salmon",  "signal", "spider",  "teapot",
      "thunder", "tiger",  "tunnel", "valley", "violin",  "walnut", "window",  "zebra"};
  return w;
}

const std::vector<std::string>& value_words() {
  static const std::vector<std::string> w = {
      "anchor",   "banjo",  "biscuit", "blanket", "bottle",  "breeze", "button",   "cactus",
      "carrot",   "cherry", "cobalt",  "cotton",  "crystal", "daisy",  "dolphin",  "feather",
      "fiddle",   "ginger", "granite", "hammer",  "helmet",  "honey",  "iris",     "ivory",
      "jasmine",  "jigsaw", "kayak",   "kernel",  "lemon",   "lily",   "magnet",   "maple",
      "marble",   "melon",  "mint",    "muffin",  "nectar",  "noodle", "oak",      "olive",
      "onion",    "opal",   "oyster",  "paddle",  "parrot",  "peach",  "pearl",    "pencil",
      "pigeon",   "plum",   "quartz",  "quill",   "radish",  "raven",  "ribbon",   "robin",
      "sapphire", "scarf",  "shovel",  "spoon",   "tulip",   "turnip", "umbrella", "walrus"};
  return w;
}

const std::vector<std::string>& first_names() {
  static const std::vector<std::string> w = {
      "Aaron",   "Abigail", "Adam",   "Adrian",  "Aiden",  "Alice",    "Amelia",   "Andrew",
      "Anna",    "Anthony", "Aria",   "Arthur",  "Audrey", "Ava",      "Benjamin", "Bella",
      "Brian",   "Brooke",  "Caleb",  "Camila",  "Carlos", "Caroline", "Charles",  "Chloe",
      "Claire",  "Daniel",  "David",  "Diana",   "Dylan",  "Edward",   "Eleanor",  "Elena",
      "Elijah",  "Ella",    "Emily",  "Emma",    "Eric",   "Ethan",    "Eva",      "Felix",
      "Fiona",   "Gabriel", "Grace",  "Hannah",  "Harper", "Henry",    "Isaac",    "Isabel",
      "Jack",    "Jacob",   "James",  "Jasmine", "Jason",  "Julia",    "Julian",   "Kevin",
      "Laura",   "Leah",    "Leo",    "Liam",    "Lily",   "Logan",    "Lucas",    "Lucy",
      "Luke",    "Madison", "Maria",  "Mark",    "Mason",  "Maya",     "Mia",      "Michael",
      "Mila",    "Naomi",   "Nathan", "Nina",    "Noah",   "Nora",     "Oliver",   "Olivia",
      "Oscar",   "Owen",    "Paul",   "Peter",   "Quinn",  "Rachel",   "Rebecca",  "Robert",
      "Rose",    "Ruby",    "Ryan",   "Samuel",  "Sara",   "Scarlett", "Sean",     "Sofia",
      "Sophie",  "Stella",  "Steven", "Thomas",  "Tyler",  "Victor",   "Victoria", "Violet",
      "William", "Wyatt",   "Xavier", "Yara",    "Zoe",    "Hugo",     "Ivy",      "Jonah",
      "Kara",    "Levi",    "Molly",  "Nadia",   "Omar",   "Penny",    "Reid",     "Simon",
      "Tessa",   "Uma",     "Vera",   "Wade",    "Yusuf",  "Zara",     "Greta",    "Hector"};
  return w;
}

const std::vector<std::string>& last_names() {
  static const std::vector<std::string> w = {
      "Adams",     "Allen",     "Alvarez",  "Anderson",  "Baker",    "Bailey",   "Bennett",
      "Brooks",    "Brown",     "Bryant",   "Butler",    "Campbell", "Carter",   "Castillo",
      "Chen",      "Clark",     "Coleman",  "Collins",   "Cook",     "Cooper",   "Cruz",
      "Davis",     "Diaz",      "Edwards",  "Ellis",     "Evans",    "Fisher",   "Flores",
      "Ford",      "Foster",    "Garcia",   "Gibson",    "Gomez",    "Gonzalez", "Graham",
      "Gray",      "Green",     "Griffin",  "Hall",      "Hamilton", "Harris",   "Hayes",
      "Henderson", "Hernandez", "Hill",     "Howard",    "Hughes",   "Jackson",  "Jenkins",
      "Johnson",   "Jones",     "Jordan",   "Kelly",     "Kennedy",  "Kim",      "King",
      "Lee",       "Lewis",     "Long",     "Lopez",     "Marshall", "Martin",   "Martinez",
      "Mendoza",   "Meyer",     "Miller",   "Mitchell",  "Moore",    "Morales",  "Morgan",
      "Morris",    "Murphy",    "Myers",    "Nelson",    "Nguyen",   "Ortiz",    "Owens",
      "Palmer",    "Parker",    "Patel",    "Perez",     "Perry",    "Peterson", "Phillips",
      "Powell",    "Price",     "Ramirez",  "Reed",      "Reyes",    "Reynolds", "Richardson",
      "Rivera",    "Roberts",   "Robinson", "Rodriguez", "Rogers",   "Ross",     "Russell",
      "Sanchez",   "Sanders",   "Scott",    "Shaw",      "Simmons",  "Smith",    "Stewart",
      "Stone",     "Sullivan",  "Taylor",   "Thompson",  "Torres",   "Tucker",   "Turner",
      "Walker",    "Wallace",   "Ward",     "Warren",    "Watson",   "Webb",     "Wells",
      "West",      "White",     "Williams", "Wilson",    "Wood",     "Wright",   "Young",
      "Zhang",     "Hart"};
  return w;
}

const std::vector<std::string>& essay_sentences() {
  static const std::vector<std::string> s = {
      "The old library opened its doors early on weekdays and closed late on Fridays.",
      "A narrow path wound through the hills, past a farm with a red barn and a windmill.",
      "Most of the town's bread came from a small bakery near the railway station.",
      "In the spring the river rose a little and the meadows along its banks turned green.",
      "She kept a notebook of the birds she saw and the weather on each day she walked.",
      "The museum's newest room showed maps drawn by sailors several centuries ago.",
      "Every summer the village held a fair with music, games and long tables of food.",
      "Learning a new language takes patience, because words only stick after many "
      "repetitions.",
      "The bridge was painted twice a decade to protect the steel from rain and salt.",
      "A good recipe lists its ingredients in the order in which they are used.",
      "He repaired old clocks in a workshop that smelled of oil and polished brass.",
      "The train to the coast left at nine and arrived a little after noon.",
      "Clouds gathered over the valley in the afternoon, but the rain never came.",
      "The garden had rows of beans, a patch of herbs and a pear tree by the fence.",
      "Children in the neighborhood learned to swim in the lake behind the school.",
      "The committee met once a month to plan repairs to the community hall.",
      "Some of the oldest trees in the park were planted when the streets were first laid "
      "out.",
      "A careful reader notices how an argument is built as well as what it claims.",
      "The market sold apples, cheese, honey and wool from the farms nearby.",
      "At night the lighthouse swept its beam across the water in slow circles.",
      "The team tested the new design for weeks before anyone was allowed to use it.",
      "Snow covered the mountain pass from November until the end of March.",
      "Her grandfather told stories about the years he spent building roads in the north.",
      "The students compared their measurements and found that two of them disagreed.",
      "A kettle whistled in the kitchen while the radio played quietly in the corner.",
      "Small boats were pulled onto the beach when the wind turned cold in the evening.",
      "The city council voted to add more benches and trees along the main avenue.",
      "Writing a letter by hand makes one think before each sentence.",
      "The hikers rested by a stream and watched the light change on the cliffs.",
      "Over the years the shop changed owners several times but kept its old sign.",
      "A map is most useful when its scale and its legend are easy to read.",
      "The orchestra rehearsed the final movement until every entry was exact."};
  return s;
}

size_t longest(const std::vector<std::string>& words) {
  size_t n = 0;
  for (const std::string& w : words) n = std::max(n, w.size());
  return n;
}

}  // namespace lcr::tasks::longctx
