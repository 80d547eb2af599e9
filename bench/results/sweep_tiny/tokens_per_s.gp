set encoding utf8
set title 'tiny_cpu.yaml: training throughput' noenhanced
set xlabel 'ranks' noenhanced
set ylabel 'tokens/s (all ranks)' noenhanced
set grid
set key outside right top noenhanced
set xtics (1, 2, 4)
set xrange [0.75:4.25]
set yrange [0:*]
set format x '%.12g'
set format y '%.12g'
set table 'bench/results/sweep_tiny/tokens_per_s.points.txt'
plot 'bench/results/sweep_tiny/tokens_per_s.dat' index 0 using 1:2 with linespoints lw 2 pt 7 title 'stage 0', '' index 1 using 1:2 with linespoints lw 2 pt 7 title 'stage 1', '' index 2 using 1:2 with linespoints lw 2 pt 7 title 'stage 2', '' index 3 using 1:2 with linespoints lw 2 pt 7 title 'stage 3'
unset table
set format x '%g'
set format y '%g'
set terminal pngcairo size 1000,600 noenhanced
set output 'bench/results/sweep_tiny/tokens_per_s.png'
replot
unset output
